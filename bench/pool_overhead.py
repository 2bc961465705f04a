"""Pool overhead: the same batch through the Ray pool and through in-process threads.

Scores N coin_change completions (half right, half wrong) with the local sandbox provider,
once with ``backend="threads"`` and once with ``backend="ray"`` (the pool), at the same
parallelism; the two alternate for ``--rounds`` rounds so both see the same machine load.
Prints both rates (best round each) and pool/threads (target: >= 0.9 at 256 completions).

Usage:
    python bench/pool_overhead.py [--n 256] [--parallel 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.pool import get_pool
from deepgym_ray.suites import load_environment

WRONG = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    env = load_environment("coin_change")
    outputs = [env.reference_solution if i % 2 == 0 else WRONG for i in range(args.n)]

    threads = DeepGym("local", backend="threads")
    # One actor running `parallel` sandboxes: the same parallelism as the threads backend.
    pool_config = PoolConfig(name=f"bench-{uuid.uuid4().hex[:6]}", actors=1,
                             actor_concurrency=args.parallel, num_cpus_per_actor=0)
    ray_client = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=pool_config))
    # Warm both: provider probes, the pool's actor, its environment cache.
    threads.run_batch(env, outputs[:args.parallel * 2], max_parallel=args.parallel)
    ray_client.run_batch(env, outputs[:args.parallel * 2], max_parallel=args.parallel)

    rates: dict[str, list[float]] = {"threads": [], "ray": []}
    try:
        for _ in range(args.rounds):
            for name, client in (("threads", threads), ("ray", ray_client)):
                started = time.perf_counter()
                batch = client.run_batch(env, outputs, max_parallel=args.parallel)
                rates[name].append(args.n / (time.perf_counter() - started))
                if batch.no_verdict or batch.passed != (args.n + 1) // 2:
                    raise SystemExit(f"{name}: unexpected results: passed {batch.passed}, "
                                     f"no verdict {batch.no_verdict}")
    finally:
        get_pool(ray_client).shutdown()
    best_threads, best_ray = max(rates["threads"]), max(rates["ray"])
    print(f"completions: {args.n}  parallel: {args.parallel}  rounds: {args.rounds}")
    print(f"threads (in process): {best_threads:7.1f} runs/s  rounds: "
          f"{', '.join(f'{r:.1f}' for r in rates['threads'])}")
    print(f"ray pool:             {best_ray:7.1f} runs/s  rounds: "
          f"{', '.join(f'{r:.1f}' for r in rates['ray'])}")
    print(f"ratio pool/threads: {best_ray / best_threads:.2f}  (target >= 0.90)")


if __name__ == "__main__":
    main()
