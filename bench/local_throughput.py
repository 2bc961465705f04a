"""Local sandbox throughput against the no-isolation floor, measured side by side.

Scores N coin_change completions (half right, half wrong) with ``DeepGym(mode="local")
.run_batch`` and, in the same run, the floor: the same verifier and solution in one plain
``python3 -I`` process per completion (the verifier imports the solution in-process, no
sandbox), with the same parallelism. Prints both rates and their ratio (target: >= 0.6), and
CPU per run for both, counted as ``bench/judge_cpu.py`` counts it (a cpuacct cgroup of its own
when it can create one: rusage cannot see the fork server's runners or PID-namespaced
solution processes).

Usage:
    python bench/local_throughput.py [--n 64] [--parallel 2] [--rounds 2]

Each rate is the best of the rounds (floor and local alternate, so both see the same load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from judge_cpu import cpu_seconds, own_cgroup  # bench/ is on sys.path when run as a script

from deepgym_ray.client import DeepGym
from deepgym_ray.judge import sandbox_judge_files
from deepgym_ray.suites import load_environment

WRONG = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"

# The floor's stand-in for deepgym_solution: the solution is imported in-process. The real
# deepgym_cases (what the verifier scores with) runs on top of it and closes what it loaded.
FLOOR_SHIM = """
import importlib.util

class _InProcess:
    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def close(self):
        pass

def load_solution(path, timeout=None):
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return _InProcess(module)
"""
# deepgym_cases calls through deepgym_proxy: the floor's calls are plain, in-process ones.
FLOOR_PROXY = """
def function_caller(solution, name):
    return getattr(solution, name)

def close_solution(solution):
    pass
"""
CASES = sandbox_judge_files()["deepgym_cases.py"]
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
        Path(tmp, "deepgym_cases.py").write_bytes(CASES)
        Path(tmp, "deepgym_proxy.py").write_text(FLOOR_PROXY)
        done = subprocess.run([python, "-I", "-c", FLOOR_DRIVER], cwd=tmp,
                              capture_output=True, timeout=60)
        if done.returncode != 0 or not done.stdout.strip():
            raise SystemExit(f"the floor run failed: {done.stderr.decode()[-2000:]}")
        return float(json.loads(done.stdout.splitlines()[-1])["score"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    group = own_cgroup()  # before anything starts: every process we start joins it
    env = load_environment("coin_change")
    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    dg = DeepGym("local", backend="threads")
    try:
        report(args, env, python, dg, group)
    finally:
        dg.close()  # its fork server: the cgroup empties once it is gone


def report(args, env, python: str, dg: DeepGym, group) -> None:
    """Measure floor and local side by side, ``args.rounds`` times, and print the best."""
    outputs = [env.reference_solution if i % 2 == 0 else WRONG for i in range(args.n)]
    dg.run(env, env.reference_solution)  # warm: provider probe, file cache
    floor_rates, local_rates, floor_cpu, local_cpu = [], [], [], []
    for _ in range(args.rounds):
        started, cpu = time.perf_counter(), cpu_seconds(group)
        with ThreadPoolExecutor(args.parallel) as pool:
            floor_scores = list(pool.map(lambda c: floor_one(python, env.verifier_code, c),
                                         outputs))
        floor_rates.append(args.n / (time.perf_counter() - started))
        floor_cpu.append((cpu_seconds(group) - cpu) / args.n)
        started, cpu = time.perf_counter(), cpu_seconds(group)
        batch = dg.run_batch(env, outputs, max_parallel=args.parallel)
        local_rates.append(args.n / (time.perf_counter() - started))
        local_cpu.append((cpu_seconds(group) - cpu) / args.n)
        scores = [r.score for r in batch.results]
        if scores != floor_scores or batch.no_verdict:
            raise SystemExit(f"scores differ from the floor: {scores} vs {floor_scores}")
    floor, local = max(floor_rates), max(local_rates)
    print(f"completions: {args.n}  parallel: {args.parallel}  rounds: {args.rounds}")
    print(f"floor (python3 -I, no isolation): {floor:7.1f} runs/s")
    print(f"local sandbox (DeepGym.run_batch): {local:7.1f} runs/s")
    print(f"ratio local/floor: {local / floor:.2f}  (target >= 0.60)")
    # CPU seconds per run barely depend on other load, so they show the isolation's cost
    # even on a busy machine.
    counted = ("a cpuacct cgroup" if group else
               "rusage: undercounts local (forked runners, PID namespaces)")
    print(f"cpu per run: floor {min(floor_cpu) * 1000:.1f} ms, local {min(local_cpu) * 1000:.1f} ms"
          f"  (floor/local {min(floor_cpu) / min(local_cpu):.2f}; counted by {counted})")
    print(f"isolation: {dg.provider.isolation}")


if __name__ == "__main__":
    main()
