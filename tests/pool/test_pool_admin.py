"""What an operator sees and does: pool status and shutdown (API and CLI), metrics, giving up
on a map, and joining a cluster that is not there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from helpers.pool_providers import make_client, script

from deepgym_ray.config import PoolConfig
from deepgym_ray.models import Environment
from deepgym_ray.pool import VerifierPool
from deepgym_ray.pool.admin import pool_status, shutdown_pools
from deepgym_ray.pool.connect import ClusterConnectionError, _auth_hint

ENV = Environment(name="scripted", verifier_code="return 1.0")


@pytest.fixture
def pool(ray_local, tmp_path):
    config = PoolConfig(name=f"adm-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=4,
                        num_cpus_per_actor=0, max_retries=0)
    made = VerifierPool(make_client(tmp_path, pool=config))
    yield made
    made.shutdown()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deepgym_ray.cli", *args], env=env,
                          capture_output=True, text=True, timeout=180)


def _cluster_env(ray_local) -> dict[str, str]:
    return {**os.environ, "RAY_ADDRESS": ray_local.get_runtime_context().gcs_address}


def test_status_counts_runs_and_no_verdicts_then_shutdown_stops_the_pool(pool):
    answers = [script(score=1.0)] * 5 + [script(fail="always")] * 2
    results = list(pool.map(ENV, answers, max_parallel=4))
    assert sum(not r.has_verdict for r in results) == 2
    mine = [p for p in pool_status() if p.name == pool.name]
    assert len(mine) == 1
    status = mine[0]
    assert (status.actors, status.alive, status.provider) == (2, 2, "local")
    assert status.runs == 7 and status.no_verdict == 2 and status.in_flight == 0
    assert sum(status.nodes.values()) == 2
    assert shutdown_pools(pool.name) == 2
    assert not [p for p in pool_status() if p.name == pool.name]


@pytest.mark.slow
def test_pool_commands_on_the_cli(pool, ray_local):
    list(pool.map(ENV, [script(score=1.0)] * 3, max_parallel=2))
    env = _cluster_env(ray_local)
    shown = _cli("pool", "status", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    mine = [p for p in json.loads(shown.stdout) if p["name"] == pool.name]
    assert mine and mine[0]["runs"] == 3 and mine[0]["alive"] == 2
    table = _cli("pool", "status", env=env)
    assert table.returncode == 0 and pool.name in table.stdout and "NO VERDICT" in table.stdout
    stopped = _cli("pool", "shutdown", pool.name, env=env)
    assert stopped.returncode == 0 and "stopped 2 actors" in stopped.stdout, stopped.stderr
    assert not [p for p in pool_status() if p.name == pool.name]
    # A pool that is not running is a mistake (exit 2, named); nothing to stop is not.
    again = _cli("pool", "shutdown", pool.name, env=env)
    assert again.returncode == 2 and f"no pool named {pool.name!r} is running" in again.stderr
    if not pool_status():
        nothing = _cli("pool", "shutdown", env=env)
        assert nothing.returncode == 0, nothing.stderr
        assert "no verifier pool is running; nothing to stop" in nothing.stdout


@pytest.mark.slow
def test_a_map_given_up_withdraws_its_queued_runs(pool):
    actor_stats = pool.stats  # counters summed over the pool's actors
    run = pool.map(ENV, [script(score=1.0, sleep=1.5)] * 40, max_parallel=4, chunk_size=8)
    first = next(run)
    assert first.score == 1.0
    run.close()
    deadline = time.monotonic() + 60
    while sum(s["in_flight"] for s in actor_stats()) and time.monotonic() < deadline:
        time.sleep(0.2)  # the runs already started end on their own (1.5 s each)
    stats = actor_stats()
    assert sum(s["in_flight"] for s in stats) == 0
    # Each actor got a chunk of 4 (2 slots running, 2 queued), then, as the first result came
    # back, another such chunk. Left alone, the actors would run all 16; given up, the second
    # chunks lose their queued half (or never start): 12 runs at most.
    assert sum(s["runs"] for s in stats) <= 12


@pytest.mark.slow
def test_runs_show_up_in_rays_metrics(pool, ray_local):
    list(pool.map(ENV, [script(score=1.0)] * 3 + [script(fail="always")], max_parallel=4))
    port = ray_local._private.worker.global_worker.node.metrics_export_port
    wanted = ("ray_deepgym_runs_total", "ray_deepgym_no_verdict_total",
              "ray_deepgym_run_seconds", "ray_deepgym_queue_wait_seconds")
    deadline = time.monotonic() + 180  # Ray exports metrics every ten seconds
    lines: list[str] = []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            lines = [line for line in reply.read().decode().splitlines()
                     if f'pool="{pool.name}"' in line]
        total = sum(float(line.rsplit(" ", 1)[1]) for line in lines
                    if line.startswith("ray_deepgym_runs_total"))
        if total >= 4 and all(any(line.startswith(w) for line in lines) for w in wanted):
            break
        time.sleep(1)
    runs: dict[str, float] = {}  # one series per actor process: add them up
    for line in lines:
        if line.startswith("ray_deepgym_runs_total"):
            outcome = line.split('outcome="')[1].split('"')[0]
            runs[outcome] = runs.get(outcome, 0.0) + float(line.rsplit(" ", 1)[1])
    assert runs == {"passed": 3.0, "no_verdict": 1.0}
    assert any(line.startswith("ray_deepgym_no_verdict_total") and "sandbox_error" in line
               for line in lines)
    assert all(any(line.startswith(w) for line in lines) for w in wanted)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_an_address_where_nothing_answers_fails_fast_and_names_it(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{_free_port()}",
           "DEEPGYM_RAY_CONNECT_TIMEOUT": "2"}
    env.pop("RAY_NODE_IP_ADDRESS", None)
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"task_id": "coin_change", "completion": "x"}) + "\n")
    done = _cli("eval", "coin_change", "--solutions", str(answers), "--no-progress", env=env)
    assert done.returncode != 0
    assert env["RAY_ADDRESS"] in done.stderr and "no Ray cluster answers" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr


def test_token_authentication_errors_name_ray_auth_mode():
    from ray.exceptions import AuthenticationError

    hint = _auth_hint(AuthenticationError("Authentication failed: InvalidAuthToken"))
    assert isinstance(hint, ClusterConnectionError)
    assert "RAY_AUTH_MODE=token" in str(hint) and "auth_token" in str(hint)
    assert _auth_hint(RuntimeError("connection reset")) is None


def test_status_without_a_cluster_says_so(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": "", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", "import ray, deepgym_ray.pool.admin as a\n"
         "import ray._private.services as s\n"
         "s.canonicalize_bootstrap_address = lambda *x, **k: None\n"  # no `ray start` record
         "try:\n    a.pool_status()\nexcept a.ClusterConnectionError as e:\n    print(e)\n"
         "print('started' if ray.is_initialized() else 'nothing started')"],
        env=env, capture_output=True, text=True, timeout=120)
    assert "no Ray cluster is running here" in done.stdout, done.stderr
    assert "nothing started" in done.stdout


@pytest.mark.slow
def test_a_recorded_cluster_that_is_gone_leaves_a_local_instance(ray_temp_dir):
    """A `ray start` record naming an address nobody answers at: Ray itself would retry it
    for minutes; the warning's promise, a local instance, is what happens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    os.makedirs(os.path.join(ray_temp_dir, "ray"))
    with open(os.path.join(ray_temp_dir, "ray", "ray_current_cluster"), "w") as f:
        f.write(dead)
    code = ("from deepgym_ray.pool.connect import ensure_ray\n"
            "ray = ensure_ray()\n"
            "print('started', ray.get_runtime_context().gcs_address)\n"
            "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = ray_temp_dir
    # (The limit only keeps a hang from holding the suite: it took minutes before.)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    started = proc.stdout.split()
    assert started[0] == "started" and started[1] != dead
    assert f"the Ray cluster `ray start` recorded at {dead} does not answer" in proc.stderr
    # Not Ray's scan of every Ray on the machine, which named another one to connect to.
    assert "Found multiple active Ray instances" not in proc.stderr
