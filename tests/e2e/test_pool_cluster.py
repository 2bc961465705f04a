"""The pool on a real 3-node ray.cluster_utils.Cluster (127.0.0.1), and the embedded default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for tests/helpers
from helpers.pool_providers import Gate, make_client, script  # noqa: E402
from helpers.ray_cluster import three_node_cluster, worker_holding  # noqa: E402

from deepgym_ray.config import PoolConfig  # noqa: E402
from deepgym_ray.models import Environment  # noqa: E402
from deepgym_ray.pool import VerifierPool  # noqa: E402

pytestmark = pytest.mark.e2e

ENV = Environment(name="scripted", verifier_code="return 1.0")


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes on 127.0.0.1 (see helpers.ray_cluster.three_node_cluster)."""
    with three_node_cluster("deepgym_ray_e2e") as made:
        yield made


def make_pool(tmp_path, actors=6):
    config = PoolConfig(name=f"c-{uuid.uuid4().hex[:8]}", actors=actors, actor_concurrency=2,
                        num_cpus_per_actor=0.5, max_retries=3)
    return VerifierPool(make_client(tmp_path, pool=config))


def node_of(result):
    return result.sandbox_id.split("/", 1)[0]


def alive_nodes():
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def test_actors_spread_over_nodes_and_work_runs_on_every_node(cluster, tmp_path):
    pool = make_pool(tmp_path, actors=6)
    answers = [script(score=1.0, sleep=0.05, node=1) for _ in range(60)]
    results = list(pool.map(ENV, answers, max_parallel=12))
    assert len(results) == 60 and all(r.passed for r in results)
    actor_nodes = {s["node_id"] for s in pool.stats()}
    assert len(actor_nodes) > 1
    assert {node_of(r) for r in results} == alive_nodes()  # all three nodes did work
    pool.shutdown()


def test_removing_a_node_mid_batch_loses_no_result(cluster, tmp_path):
    _, workers = cluster
    pool = make_pool(tmp_path, actors=6)
    by_node = {s["node_id"]: s for s in pool.stats()}
    victim = worker_holding(workers, set(by_node))
    gate = Gate(tmp_path, "hold")
    answers = [script(score=(i % 4) / 4, gate="hold", node=1) for i in range(60)]
    calls, results, failures = [], [], []
    run = pool.map(ENV, answers, max_parallel=12, on_result=lambda i, r: calls.append(i))

    def drive():
        try:
            results.extend(run)
        except BaseException as exc:  # reported below, in the test's own thread
            failures.append(exc)

    driver = threading.Thread(target=drive, name="map-driver")
    driver.start()
    try:
        # The batch is held in flight by the gate: the node goes while runs are on it, however
        # fast or slow the machine is.
        gate.wait_started(1, node=victim.node_id)
        assert calls == []  # nothing has finished yet
        cluster[0].remove_node(victim, allow_graceful=False)
    finally:
        # The runs held on the lost node never finish there, even in a worker process that
        # outlives its node for a moment: their results must come from the retries.
        gate.open(except_node=victim.node_id)
        driver.join(timeout=600)
    assert not driver.is_alive() and failures == []
    assert sorted(calls) == list(range(60))  # exactly one result per input
    assert [r.score for r in results] == [(i % 4) / 4 for i in range(60)]
    assert all(r.has_verdict for r in results)  # the lost runs were retried and judged
    assert victim.node_id not in {node_of(r) for r in results}  # none judged on the lost node
    assert run.stats.actor_failures >= 1 and run.stats.retries >= 1
    # The batch may finish (its lost runs retried elsewhere) before Ray's health checks have
    # declared the node dead; wait for that verdict, boundedly.
    deadline = time.monotonic() + 60
    while victim.node_id in alive_nodes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert victim.node_id not in alive_nodes()
    pool.shutdown()


def test_embedded_ray_starts_on_first_batch_and_import_is_cheap(ray_temp_dir):
    """No cluster, backend "ray": the first batch starts a local Ray on this machine without
    a dashboard (backend "auto", the default, scores in process then: tests/test_client.py)."""
    code = textwrap.dedent("""
        import json, sys
        import deepgym_ray
        cheap = "ray" not in sys.modules
        from helpers.pool_providers import make_client, script
        from deepgym_ray.config import PoolConfig
        from deepgym_ray.models import Environment
        client = make_client(pool=PoolConfig(actors=1, num_cpus_per_actor=0), backend="ray")
        env = Environment(name="scripted", verifier_code="return 1.0")
        batch = client.run_batch(env, [script(score=1.0), script(score=0.5)])
        import ray
        node = ray._private.worker.global_worker.node
        print("OUT", json.dumps({"cheap": cheap, "rewards": batch.rewards,
                                 "started_here": bool(node.head),
                                 "node_ip": node.node_ip_address,
                                 "dashboard": node.webui_url}))
        ray.shutdown()
    """)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # A temp dir of its own: no `ray start` address file to find (and short socket paths).
    env.update(RAY_TMPDIR=ray_temp_dir, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("OUT "))[4:])
    assert out["cheap"] is True
    assert out["rewards"] == [1.0, 0.5]
    # It started a Ray of its own (not joined one), on the loopback interface (conftest.py keeps
    # Ray from rewriting 127.0.0.1), without a dashboard.
    assert out["started_here"] is True and not out["dashboard"]
    assert out["node_ip"] == "127.0.0.1"
