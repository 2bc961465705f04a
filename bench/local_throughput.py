"""Local sandbox throughput against the no-isolation floor, measured side by side.

Scores N coin_change completions (half right, half wrong) with ``DeepGym(mode="local")
.run_batch`` and, in the same run, the floor: the same verifier and solution in one plain
``python3 -I`` process per completion (the verifier imports the solution in-process, no
sandbox), with the same parallelism. Prints both rates and their ratio (target: >= 0.6).

Usage:
    python bench/local_throughput.py [--n 64] [--parallel 2] [--rounds 2]

Each rate is the best of the rounds (floor and local alternate, so both see the same load).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from deepgym_ray.client import DeepGym
from deepgym_ray.envs import load_environment

WRONG = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"

# The floor's stand-in for deepgym_solution: the verifier imports the solution directly.
FLOOR_SHIM = """
import importlib.util
def load_solution(path, timeout=None):
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
"""
FLOOR_DRIVER = """
import json, sys
sys.path.insert(0, ".")
import verifier
print(json.dumps(verifier.verify("solution.py")))
"""


def floor_one(python: str, verifier: str, code: str) -> float:
    with tempfile.TemporaryDirectory(prefix="deepgym-floor-") as tmp:
        Path(tmp, "verifier.py").write_text(verifier)
        Path(tmp, "solution.py").write_text(code)
        Path(tmp, "deepgym_solution.py").write_text(FLOOR_SHIM)
        done = subprocess.run([python, "-I", "-c", FLOOR_DRIVER], cwd=tmp,
                              capture_output=True, timeout=60)
        return float(json.loads(done.stdout.splitlines()[-1])["score"])


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    env = load_environment("coin_change")
    outputs = [env.reference_solution if i % 2 == 0 else WRONG for i in range(args.n)]
    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    dg = DeepGym("local", backend="threads")
    dg.run(env, env.reference_solution)  # warm: provider probe, file cache
    floor_rates, local_rates, floor_cpu, local_cpu = [], [], [], []
    for _ in range(args.rounds):
        started, cpu = time.perf_counter(), _cpu()
        with ThreadPoolExecutor(args.parallel) as pool:
            floor_scores = list(pool.map(lambda c: floor_one(python, env.verifier_code, c),
                                         outputs))
        floor_rates.append(args.n / (time.perf_counter() - started))
        floor_cpu.append((_cpu() - cpu) / args.n)
        started, cpu = time.perf_counter(), _cpu()
        batch = dg.run_batch(env, outputs, max_parallel=args.parallel)
        local_rates.append(args.n / (time.perf_counter() - started))
        local_cpu.append((_cpu() - cpu) / args.n)
        scores = [r.score for r in batch.results]
        if scores != floor_scores or batch.no_verdict:
            raise SystemExit(f"scores differ from the floor: {scores} vs {floor_scores}")
    floor, local = max(floor_rates), max(local_rates)
    print(f"completions: {args.n}  parallel: {args.parallel}  rounds: {args.rounds}")
    print(f"floor (python3 -I, no isolation): {floor:7.1f} runs/s")
    print(f"local sandbox (DeepGym.run_batch): {local:7.1f} runs/s")
    print(f"ratio local/floor: {local / floor:.2f}  (target >= 0.60)")
    # CPU seconds per run (this process and its children) barely depend on other load, so
    # they show the isolation's cost even on a busy machine.
    print(f"cpu per run: floor {min(floor_cpu) * 1000:.1f} ms, local {min(local_cpu) * 1000:.1f} ms"
          f"  (floor/local {min(floor_cpu) / min(local_cpu):.2f})")
    print(f"isolation: {dg.provider.isolation}")


if __name__ == "__main__":
    main()
