"""Latency-bound providers: every run waits 100 ms, as a remote sandbox service would.

1,000 completions at ``max_parallel=200`` cannot finish faster than 1000 / 200 x 0.1 s = 0.5 s;
the script prints the measured rate as a fraction of that ideal (target: >= 0.8). The pool is
shaped the way a remote provider wants it: a few light actors with many threads each.

Usage:
    python bench/pool_latency.py [--n 1000] [--max-parallel 200] [--delay 0.1] [--actors 4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from pool_dispatch import make_pool  # noqa: E402

from deepgym_ray.models import Environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    concurrency = -(-args.max_parallel // args.actors)  # room for every run in flight
    pool = make_pool(args.actors, concurrency, delay=args.delay)
    env = Environment(name="sleepy", verifier_code="return 1.0")
    ideal = args.n / args.max_parallel * args.delay
    try:
        list(pool.map(env, ["print(1)"] * args.max_parallel, args.max_parallel))  # warm-up
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            results = list(pool.map(env, ["print(1)"] * args.n, args.max_parallel))
            times.append(time.perf_counter() - start)
            assert len(results) == args.n and all(r.passed for r in results)
    finally:
        pool.shutdown()
    best = min(times)
    print(f"{args.n} runs of {args.delay * 1000:.0f} ms at max_parallel={args.max_parallel}, "
          f"{args.actors} actors x {concurrency}")
    print(f"ideal {ideal:.3f}s; measured best {best:.3f}s (all: "
          f"{', '.join(f'{t:.3f}' for t in times)})")
    print(f"fraction of ideal rate: {ideal / best:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
