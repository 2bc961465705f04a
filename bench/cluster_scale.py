"""Cluster scale, simulated: throughput of a latency-bound provider on 1, 2, 4 and 8 nodes.

Each node of a ``ray.cluster_utils.Cluster`` (all on this machine) has one CPU and hosts one
verifier actor; the provider makes every run wait ``--delay`` seconds and each actor runs
``--per-node`` at once, so the cluster's capacity grows with its nodes exactly as a fleet of
sandbox hosts would. The script prints each size's rate and the 8-node rate as a fraction of
8 x the one-node rate (target: >= 0.8).

Usage:
    python bench/cluster_scale.py [--nodes 1 2 4 8] [--per-node 16] [--delay 0.2] [--waves 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
sys.path.insert(0, str(Path(__file__).parent))
from pool_dispatch import NullProvider  # noqa: E402

from deepgym_ray.client import DeepGym  # noqa: E402
from deepgym_ray.config import DeepGymConfig, PoolConfig  # noqa: E402
from deepgym_ray.models import Environment  # noqa: E402
from deepgym_ray.pool import VerifierPool  # noqa: E402

NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


def rate_on(nodes: int, per_node: int, delay: float, waves: int) -> float:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(**NODE)
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        cluster.wait_for_nodes()
        config = PoolConfig(name=f"scale-{uuid.uuid4().hex[:6]}", actors=nodes,
                            actor_concurrency=per_node, num_cpus_per_actor=1)
        client = DeepGym(config=DeepGymConfig(mode="local", pool=config),
                         provider=lambda: NullProvider(delay))
        pool = VerifierPool(client)
        env = Environment(name="sleepy", verifier_code="return 1.0")
        width = nodes * per_node
        list(pool.map(env, ["print(1)"] * width, width))  # warm-up: every actor answers
        n = width * waves
        start = time.perf_counter()
        results = list(pool.map(env, ["print(1)"] * n, width))
        elapsed = time.perf_counter() - start
        assert len(results) == n and all(r.passed for r in results)
        pool.shutdown()
        return n / elapsed
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--per-node", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--waves", type=int, default=8)
    args = parser.parse_args()
    rates = {}
    for nodes in args.nodes:
        rates[nodes] = rate_on(nodes, args.per_node, args.delay, args.waves)
        ideal = nodes * args.per_node / args.delay
        print(f"{nodes} node(s): {rates[nodes]:.1f} runs/s (capacity {ideal:.0f}/s: "
              f"{rates[nodes] / ideal:.2f} of it)", flush=True)
    base = rates.get(1)
    if base:
        for nodes, rate in rates.items():
            if nodes > 1:
                print(f"{nodes} nodes against {nodes} x one node: {rate / (nodes * base):.2f}"
                      + (" (target >= 0.8)" if nodes == 8 else ""))


if __name__ == "__main__":
    main()
