"""Local sandbox throughput of this tree against an earlier commit's, measured side by side.

Checks a change to the local sandbox's hot path (issue 32: the syscall filter and the run's CPU
read from its cgroup) against the tree before it. The earlier commit is checked out in a
temporary git worktree (``trees.py``); each round scores the same N coin_change completions
(half right, half wrong) with ``DeepGym("local", backend="threads").run_batch`` once per tree,
in a fresh process whose ``PYTHONPATH`` puts that tree's package first, alternating the order
so both trees see the same load. Each process counts its CPU in a cpuacct cgroup of its own (see
``judge_cpu.py``).

Usage:
    python bench/local_before_after.py --before 152f9f7 [--after REV] [--n 64] [--rounds 3]

Prints runs/s and CPU ms per run for both trees (the best of the rounds) and their ratios
(target: after/before >= 0.95).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trees import run_in, worktrees

# One tree's measurement, in a process of its own (the tree comes first on PYTHONPATH).
MEASURE = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_DIR"])
from judge_cpu import cpu_seconds, own_cgroup
group = own_cgroup()
import deepgym_ray
from deepgym_ray.client import DeepGym
from deepgym_ray.suites import load_environment
n, parallel = int(sys.argv[1]), int(sys.argv[2])
env = load_environment("coin_change")
wrong = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"
outputs = [env.reference_solution if i % 2 == 0 else wrong for i in range(n)]
dg = DeepGym("local", backend="threads")
dg.run(env, env.reference_solution)  # warm: the provider's probe, its fork server, caches
started, cpu = time.perf_counter(), cpu_seconds(group)
batch = dg.run_batch(env, outputs, max_parallel=parallel)
rate = n / (time.perf_counter() - started)
cpu_ms = (cpu_seconds(group) - cpu) / n * 1000
right = sum(r.score == 1.0 for r in batch.results)
dg.close()
print(json.dumps({"rate": rate, "cpu_ms": cpu_ms, "right": right, "no_verdict": batch.no_verdict,
                  "package": os.path.dirname(deepgym_ray.__file__),
                  "isolation": dg.provider.isolation}))
"""


def measure(tree: Path, n: int, parallel: int) -> dict:
    result = run_in(tree, MEASURE, str(n), str(parallel))
    if result["no_verdict"] or result["right"] != (n + 1) // 2:
        raise SystemExit(f"wrong scores on {tree}: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit (e.g. 152f9f7)")
    parser.add_argument("--after", help="a later commit to measure instead of this tree")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with worktrees(args.before, args.after) as trees:
        rates: dict[str, list[float]] = {"before": [], "after": []}
        cpus: dict[str, list[float]] = {"before": [], "after": []}
        for round_ in range(args.rounds):
            order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for name in order:
                result = measure(trees[name], args.n, args.parallel)
                rates[name].append(result["rate"])
                cpus[name].append(result["cpu_ms"])
                print(f"round {round_ + 1} {name:6}: {result['rate']:6.1f} runs/s, "
                      f"{result['cpu_ms']:5.1f} ms CPU a run", flush=True)
        last = result["isolation"]
    rate = {name: max(values) for name, values in rates.items()}
    cpu = {name: min(values) for name, values in cpus.items()}
    print(f"completions: {args.n}  parallel: {args.parallel}  rounds: {args.rounds}  "
          f"before: {args.before}")
    print(f"before: {rate['before']:6.1f} runs/s, {cpu['before']:5.1f} ms CPU a run")
    print(f"after:  {rate['after']:6.1f} runs/s, {cpu['after']:5.1f} ms CPU a run")
    print(f"ratio after/before: throughput {rate['after'] / rate['before']:.2f}, "
          f"CPU a run {cpu['before'] / cpu['after']:.2f} (higher is better; target >= 0.95)")
    print(f"isolation after: {last}")


if __name__ == "__main__":
    main()
