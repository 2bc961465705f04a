"""The Ray instances of the test run: the session's local one, and a real three-node
``ray.cluster_utils.Cluster`` on 127.0.0.1 for the e2e and fault tests that need several nodes.

Example::

    with three_node_cluster("my_tests") as (cluster, workers):
        cluster.remove_node(workers[0], allow_graceful=False)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOCAL_RAY_OPTIONS = {
    "address": "local",  # never join a cluster someone else started on this machine
    "num_cpus": 4,
    "include_dashboard": False,
    "_node_ip_address": "127.0.0.1",
    "namespace": "deepgym_ray_tests",
    "log_to_driver": False,
}
# Ray's own bookkeeping, which no test reads, made cheaper for every Ray of the test run
# (environment variables of Ray's, set by tests/conftest.py; bench/ray_instance_idle.py
# measures them against Ray's defaults):
# - the log monitor (one per instance, all session on each xdist worker) lists its log
#   directory every 0.1 s for new files to forward to drivers; the tests' drivers take none
#   (log_to_driver off), and a run's instance gathers hundreds of files, one set per worker
#   process: listed every 5 s instead;
# - the dashboard agent's reporter gathers every worker's process stats every 5 s for a
#   dashboard the tests do not start: every minute;
# - every Ray process times each of its event loop's handlers, and every worker sends its
#   tasks' state changes to the GCS each second, for the state API and timeline, which the
#   tests do not use: neither. (Metrics stay on: a test reads the pool's from Ray's exporter.)
QUIET_RAY = {"RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0", "LOG_NAME_UPDATE_INTERVAL_S": "5",
             "REPORTER_UPDATE_INTERVAL_MS": "60000", "RAY_event_stats": "0",
             "RAY_task_events_report_interval_ms": "0"}
NODE_ARGS = {"num_cpus": 2, "node_ip_address": "127.0.0.1"}
# Notice a lost node within seconds rather than the production default, but not so fast that
# a live node on a loaded 2-core machine misses its checks and is declared dead too.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                      "health_check_failure_threshold": 10}


def start_local_ray() -> Any:
    """Start the test run's local Ray instance (also used to bring it back after a test that
    needed a multi-node cluster instead)."""
    import ray

    ray.init(**LOCAL_RAY_OPTIONS)
    return ray


@contextmanager
def three_node_cluster(namespace: str) -> Iterator[tuple[Any, list[Any]]]:
    """A head and two worker nodes on 127.0.0.1, no dashboard, the driver joined to the head,
    and every node already taking work; yields ``(cluster, workers)``.

    The session's local Ray instance, if a test started it, makes way for the cluster and
    comes back afterwards.
    """
    import ray
    from ray.cluster_utils import Cluster

    restore = ray.is_initialized()
    if restore:
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={
        **NODE_ARGS, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS})
    try:
        # The head's address is recorded for `ray.init()` to join, in this process's own Ray
        # temp dir (tests/conftest.py): never where another test process would find it.
        record = os.path.join(os.environ["RAY_TMPDIR"], "ray", "ray_current_cluster")
        with open(record) as recorded:
            assert recorded.read().strip() == cluster.address
        assert os.path.basename(os.environ["RAY_TMPDIR"]) == os.environ.get(
            "PYTEST_XDIST_WORKER", "main")
        workers = [cluster.add_node(**NODE_ARGS) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", namespace=namespace,
                 log_to_driver=False)
        wait_until_every_node_takes_work([cluster.head_node, *workers])
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()
        if restore:
            start_local_ray()


def live_workers(cluster: Any, workers: list[Any]) -> list[Any]:
    """``workers`` with each one a test removed replaced by a new node, once every node takes
    work (a test that removes a node leaves the next one a cluster of two nodes, on which Ray
    may place all of a pool's SPREAD actors on the head)."""
    import ray

    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    kept = [w for w in workers if w.node_id in alive]
    if len(kept) < len(workers):
        kept += [cluster.add_node(**NODE_ARGS) for _ in range(len(workers) - len(kept))]
        cluster.wait_for_nodes()
        wait_until_every_node_takes_work([cluster.head_node, *kept])
    return kept


def worker_holding(workers: list[Any], node_ids: set[str]) -> Any:
    """The first of ``workers`` whose node is one of ``node_ids`` (where a pool's actors are)."""
    holders = [worker for worker in workers if worker.node_id in node_ids]
    assert holders, "no worker node holds any of the pool's actors"
    return holders[0]


def wait_until_every_node_takes_work(nodes: list[Any], timeout: float = 180.0) -> None:
    """Return once work the driver spreads, tasks and actors, has run on every one of
    ``nodes``.

    A node counts as registered as soon as the GCS lists it, but the head's raylet, which
    places the driver's SPREAD tasks, learns of it a moment later, and the GCS, which places
    actors, keeps a view of its own. A pool made in that moment put all four of its actors on
    the head (seen in CI under load, and again on a quiet machine after tasks had already
    spread), and the test that removes a worker node holding actors found none to remove.
    """
    import ray

    @ray.remote(num_cpus=0)
    def node_id() -> str:
        return ray.get_runtime_context().get_node_id()

    @ray.remote(num_cpus=0)
    class Probe:
        def node_id(self) -> str:
            return ray.get_runtime_context().get_node_id()

    wanted = {node.node_id for node in nodes}
    deadline = time.monotonic() + timeout
    for kind in ("tasks", "actors"):
        seen: set[str] = set()
        while True:
            left = max(deadline - time.monotonic(), 1.0)
            if kind == "tasks":
                seen.update(ray.get([node_id.options(scheduling_strategy="SPREAD").remote()
                                     for _ in range(2 * len(wanted))], timeout=left))
            else:
                probes = [Probe.options(scheduling_strategy="SPREAD").remote()
                          for _ in range(2 * len(wanted))]
                try:
                    seen.update(ray.get([p.node_id.remote() for p in probes], timeout=left))
                finally:
                    for probe in probes:
                        ray.kill(probe)
            if wanted <= seen:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"after {timeout:.0f}s, SPREAD {kind} have reached only "
                                   f"{len(seen & wanted)} of the cluster's {len(wanted)} nodes")
            time.sleep(0.2)
