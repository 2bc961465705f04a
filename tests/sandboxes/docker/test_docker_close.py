"""``close()`` returns only once every container of the client is removed (issue 32, point 6).

Right after ``DeepGym(mode="docker").close()`` two of the pool actor's containers were still
running. Each test scores on a real engine, closes, and at once lists the engine's containers
(stopped ones too) by the labels the provider puts on them: none of the client's may be left.
On threads the provider is the client's own; on the Ray pool the pool this process started is
stopped by the client's close (each actor closes its provider before it is killed), and a pool
it only joined is left running.
"""

from __future__ import annotations

import socket
import threading

import pytest
from helpers.cancel import wait_until
from helpers.docker_engine import docker_skip_reason, make_docker_client

from deepgym_ray.pool import VerifierPool, get_pool
from deepgym_ray.sandboxes.docker.container import INSTANCE_LABEL, LABEL, OWNER_LABEL
from deepgym_ray.suites import load_environment

ENV = load_environment("coin_change")
WRONG = "def coin_change(coins, amount):\n    raise ValueError(\"no idea\")\n"
# A run that stays in play until it is stopped: its verifier waits on the solution.
SLOW = "import time\n\ndef coin_change(coins, amount):\n    time.sleep(600)\n"


@pytest.fixture(scope="module")
def engine():
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    import docker

    return docker.from_env(timeout=60).api


def _named(engine, label: str) -> list[str]:
    """Names of the engine's containers (running or not) with ``label`` (key=value)."""
    return sorted(item["Names"][0].lstrip("/")
                  for item in engine.containers(all=True, filters={"label": label}))


def _of_processes(engine, pids) -> list[str]:
    """Names of the engine's docker-provider containers made by the processes ``pids``."""
    owners = {f"{socket.gethostname()}:{pid}" for pid in pids}
    return sorted(item["Names"][0].lstrip("/")
                  for item in engine.containers(all=True, filters={"label": f"{LABEL}=docker"})
                  if (item.get("Labels") or {}).get(OWNER_LABEL) in owners)


def test_a_thread_client_leaves_no_container_once_close_returns(engine):
    """Four runs at once, one warm container kept: three are removed on background threads
    as their runs end, and close waits for those removals too."""
    client = make_docker_client(backend="threads", warm_containers=1)
    provider = client.provider
    mine = f"{INSTANCE_LABEL}={provider.instance}"
    try:
        batch = client.run_batch(ENV, [ENV.reference_solution, WRONG] * 2, max_parallel=4)
        assert [r.score for r in batch.results] == [1.0, 0.0, 1.0, 0.0], batch.results
        assert _named(engine, mine), "the provider keeps a warm container"
    finally:
        client.close()
    assert _named(engine, mine) == []


def test_close_during_a_run_removes_its_container_and_the_run_has_no_verdict(engine):
    client = make_docker_client(backend="threads", warm_containers=1)
    provider = client.provider
    mine = f"{INSTANCE_LABEL}={provider.instance}"
    env = ENV.model_copy(update={"timeout": 300.0})
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(result=client.run_safe(env, SLOW)),
                              daemon=True)
    runner.start()
    try:
        wait_until(lambda: provider.containers() or not runner.is_alive(),
                   "a container started for the run")
        assert runner.is_alive(), box
    finally:
        client.close()
    assert _named(engine, mine) == []
    runner.join(120)
    result = box["result"]
    assert not result.has_verdict and result.error_type == "sandbox_error", result


@pytest.mark.slow
def test_closing_the_pool_client_removes_the_actors_containers(engine, ray_local):
    """The client started the pool (on the embedded Ray this process started): its close
    stops it, and every container of its actors is gone when close returns."""
    from ray.util import list_named_actors

    client = make_docker_client(actors=2, concurrency=2)
    pool = get_pool(client)
    try:
        batch = client.run_batch(ENV, [ENV.reference_solution, WRONG] * 4)
        assert [r.score for r in batch.results] == [1.0, 0.0] * 4, batch.results
        assert pool.owned
        pids = [stats["pid"] for stats in pool.stats()]
        assert len(pids) == 2 and _of_processes(engine, pids), "the actors keep warm containers"
    finally:
        client.close()
    assert _of_processes(engine, pids) == []
    assert not [a for a in list_named_actors(all_namespaces=True)
                if a["name"].startswith(f"{pool.name}-")]


def test_a_client_that_joined_a_pool_leaves_it_running_for_its_owner(engine, ray_local):
    """Another ``VerifierPool`` made the actors (as another driver would): the client only
    joined, so its close leaves the pool and its warm containers; the owner's shutdown then
    removes them before it returns."""
    client = make_docker_client(actors=1, concurrency=2)
    owner = VerifierPool(client)  # not the process's cached pool: the client joins it
    assert owner.owned
    try:
        batch = client.run_batch(ENV, [ENV.reference_solution, WRONG])
        assert [r.score for r in batch.results] == [1.0, 0.0], batch.results
        joined = get_pool(client)
        assert joined is not owner and not joined.owned
        pids = [stats["pid"] for stats in owner.stats()]
        client.close()
        assert owner.stats() and _of_processes(engine, pids), "the pool was left running"
    finally:
        owner.shutdown()
    assert _of_processes(engine, pids) == []
