"""A GRPO step at scale: eight trainer processes score their slices on one shared pool.

Eight driver processes each map 256 completions (``--per-driver``) at once on the same named
pool; against that, one process maps all 2,048. The provider is the local sandbox by default
(``--null-delay`` swaps in a provider that only waits, to isolate the pool). Prints the step
time of both ways (target: eight drivers within 1.1x of one) and each driver's slice time
against the median (target: none more than 1.5x).

Usage:
    python bench/pool_fairness.py [--drivers 8] [--per-driver 256] [--max-parallel 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

DRIVER = r"""
import json, os, sys, time
sys.path.insert(0, {bench!r})
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.suites import load_environment
from deepgym_ray.pool import get_pool
import ray
ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, namespace="bench")
args = json.loads(sys.argv[1])
config = DeepGymConfig(mode="local", pool=PoolConfig(**args["pool"]))
if args["null_delay"] is not None:
    from pool_dispatch import NullProvider
    delay = args["null_delay"]
    client = DeepGym(config=config, provider=lambda: NullProvider(delay))
else:
    client = DeepGym(config=config)
env = load_environment("coin_change")
pool = get_pool(client)
answers = [env.reference_solution] * args["n"]
print("ready", flush=True)
sys.stdin.readline()  # every driver starts at the same moment
start = time.perf_counter()
results = list(pool.map(env, answers, args["max_parallel"]))
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "passed": sum(r.passed for r in results)}}), flush=True)
"""


def run_drivers(count: int, n: int, common: dict) -> tuple[float, list[float]]:
    bench = os.path.dirname(os.path.abspath(__file__))
    code = DRIVER.format(bench=bench)
    procs = [subprocess.Popen([sys.executable, "-c", code, json.dumps({**common, "n": n})],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    slices = []
    for proc in procs:
        out = json.loads(proc.stdout.readline())
        assert out["passed"] == n, out
        slices.append(out["seconds"])
        proc.wait()
    return time.perf_counter() - start, slices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drivers", type=int, default=8)
    parser.add_argument("--per-driver", type=int, default=256)
    parser.add_argument("--max-parallel", type=int, default=32)
    parser.add_argument("--null-delay", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import ray

    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, namespace="bench")
    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
    common = {"pool": {"name": f"fair-{uuid.uuid4().hex[:6]}"}, "max_parallel":
              args.max_parallel, "null_delay": args.null_delay}
    total = args.drivers * args.per_driver
    one, many, worst = [], [], []
    try:
        run_drivers(1, args.max_parallel, common)  # makes the pool and warms it
        for _ in range(args.rounds):  # alternate, so both ways see the same load
            one.append(run_drivers(1, total, common)[0])
            step, slices = run_drivers(args.drivers, args.per_driver, common)
            many.append(step)
            worst.append(max(slices) / statistics.median(slices))
    finally:
        from deepgym_ray.pool.admin import shutdown_pools

        shutdown_pools(common["pool"]["name"])
        ray.shutdown()
    print(f"one driver, {total} completions: best {min(one):.2f}s (all {one})")
    print(f"{args.drivers} drivers x {args.per_driver}: best {min(many):.2f}s (all {many})")
    print(f"step time, {args.drivers} drivers against one: {min(many) / min(one):.2f} "
          "(target <= 1.1)")
    print(f"slowest slice against the median, per round: "
          f"{', '.join(f'{w:.2f}' for w in worst)} (target <= 1.5)")


if __name__ == "__main__":
    main()
