"""A worker node removed (not gracefully) while the batch's runs are held on it.

A real 3-node ``ray.cluster_utils.Cluster`` on 127.0.0.1, real local sandboxes on every node.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from gated import GatedFactory, make_gate  # noqa: E402
from held import check_contract, make_pool, run_held  # noqa: E402

pytestmark = pytest.mark.e2e

NODE_ARGS = {"num_cpus": 2, "node_ip_address": "127.0.0.1"}
# Notice a lost node within seconds, but not so fast that a busy live node is declared dead.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                      "health_check_failure_threshold": 10}


def _root_conftest():
    """tests/conftest.py (which brings the session's local Ray back), loaded by its path: the
    name ``conftest`` is ambiguous here."""
    import importlib.util

    path = Path(__file__).parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("deepgym_tests_root_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes on 127.0.0.1, no dashboard; the driver joins the head."""
    from ray.cluster_utils import Cluster

    restore = ray.is_initialized()
    if restore:
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={
        **NODE_ARGS, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS})
    try:
        workers = [cluster.add_node(**NODE_ARGS) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1",
                 namespace="deepgym_ray_faults_e2e", log_to_driver=False)
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()
        if restore:
            _root_conftest().start_local_ray()


def test_node_removed_mid_batch(cluster):
    head, workers = cluster
    name = f"gate-{uuid.uuid4().hex[:8]}"
    gate = make_gate(name)
    pool = make_pool(GatedFactory(name), actors=4, retries=3)
    try:
        by_node = {s["node_id"] for s in pool.stats()}
        victim = next(w for w in workers if w.node_id in by_node)  # a worker with actors
        held = run_held(ray, pool, gate,
                        lambda: head.remove_node(victim, allow_graceful=False), count=12)
        check_contract(held)
        assert held.stats.actor_failures >= 1 and held.stats.retries >= 1
        # Ray's own verdict on the node comes by its health checks: wait for it, boundedly.
        deadline = time.monotonic() + 60
        while victim.node_id in {n["NodeID"] for n in ray.nodes() if n["Alive"]} \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert victim.node_id not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        pool.shutdown()
        ray.kill(gate)
