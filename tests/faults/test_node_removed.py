"""A worker node removed (not gracefully) while the batch's runs are held on it.

A real 3-node ``ray.cluster_utils.Cluster`` on 127.0.0.1, real local sandboxes on every node.
"""

from __future__ import annotations

import time
import uuid

import pytest

ray = pytest.importorskip("ray")

from gated import GatedFactory, make_gate  # noqa: E402
from held import check_contract, make_pool, run_held  # noqa: E402
from helpers.ray_cluster import live_workers, three_node_cluster, worker_holding  # noqa: E402

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes on 127.0.0.1 (see helpers.ray_cluster.three_node_cluster)."""
    with three_node_cluster("deepgym_ray_faults_e2e") as made:
        yield made


def test_node_removed_mid_batch(cluster):
    head, workers = cluster
    workers = live_workers(head, workers)
    name = f"gate-{uuid.uuid4().hex[:8]}"
    gate = make_gate(name)
    # SPREAD is Ray's soft wish: under load it has put all four actors on the head of a
    # 3-node cluster whose every node had taken work; a pool with none on a worker gives this
    # test nothing to remove, so it is made again (a few times at most).
    for _ in range(5):
        pool = make_pool(GatedFactory(name), actors=4, retries=3)
        by_node = {s["node_id"] for s in pool.stats()}
        if any(worker.node_id in by_node for worker in workers):
            break
        pool.shutdown()
    try:
        victim = worker_holding(workers, by_node)
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


def test_node_removed_mid_episode(cluster):
    """Agent episodes spread over the nodes; the node holding some of them removed mid-episode:
    their next step and their score say so (no verdict, an error type naming the loss) without
    hanging, and the episodes on the other nodes go on to their verdict."""
    from helpers.episodes import RIGHT, answer_env

    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.pool import get_pool
    from deepgym_ray.sessions import Action

    head, workers = cluster
    workers = live_workers(head, workers)
    worker_ids = {worker.node_id for worker in workers}
    # SPREAD is Ray's soft wish (see test_node_removed_mid_batch): under load it put all four
    # actors on one node, which leaves this test no episodes to lose and keep; made again then.
    for _ in range(5):
        config = PoolConfig(name=f"episodes-{uuid.uuid4().hex[:8]}", actors=4,
                            actor_concurrency=2, num_cpus_per_actor=0, max_retries=0)
        client = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=config))
        pool = get_pool(client)
        nodes = [ray.get(actor.ping.remote(), timeout=120) for actor in pool.actors]
        if len(set(nodes)) > 1 and worker_ids & set(nodes):
            break
        pool.shutdown()
        client.close()
    try:
        sessions = [client.session(answer_env()) for _ in range(4)]
        for session in sessions:
            session.start()
            session.step(Action(action_type="bash", content="echo started > log.txt"))
        victim = worker_holding(workers, {nodes[s.index] for s in sessions})
        lost = [s for s in sessions if nodes[s.index] == victim.node_id]
        kept = [s for s in sessions if nodes[s.index] != victim.node_id]
        assert lost and kept, nodes  # one episode per actor, the actors on every node
        head.remove_node(victim, allow_graceful=False)
        # The node's processes go with it once Ray sees it dead (its health checks, bounded).
        deadline = time.monotonic() + 60
        while victim.node_id in {n["NodeID"] for n in ray.nodes() if n["Alive"]} \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        for session in lost:
            observation, reward, done = session.step(RIGHT)
            assert done and reward is None and "error" in observation.metadata, observation
            result = session.score()
            assert not result.has_verdict and result.error_type, result
        for session in kept:
            session.step(RIGHT)
            assert session.score().passed
    finally:
        get_pool(client).shutdown()
        client.close()
