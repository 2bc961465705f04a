"""Docker provider speed, measured side by side on the same engine and image.

1. One run in a warm container (``DeepGym(mode="docker")``, container reused) against a fresh
   ``docker run`` per completion: the same image, environment and judge runner, the files
   bind-mounted, the runner's config on stdin, the same limits (target: warm <= 0.3 of fresh).
2. Batch throughput: the same N ``coin_change`` completions (half right) through ``run_batch``
   in docker mode and in local mode, same parallelism (target: docker >= 0.7 of local).

Usage:
    python bench/docker_warm.py [--image deepgym/python:3-bookworm] [--runs 10] [--n 64]
                                [--parallel 2] [--rounds 2]

Rates are the best of the rounds (docker and local alternate, so both see the same load).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from deepgym_ray.client import DeepGym
from deepgym_ray.judge import RUNNER
from deepgym_ray.sandboxes.base import CommandResult
from deepgym_ray.scoring.judging import interpret, sandbox_files, verifier_shape
from deepgym_ray.suites import load_environment

WRONG = "def coin_change(coins, amount):\n    return -1 if amount else 0\n"


def fresh_run(image: str, env, code: str) -> float:
    """One completion in a new container (``docker run --rm``); returns its score."""
    with tempfile.TemporaryDirectory(prefix="deepgym-bench-") as work:
        for name, content in sandbox_files(env, code).items():
            path = Path(work, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        Path(work).chmod(0o755)
        token = secrets.token_hex(16)
        config = {"token": token, "verifier": "verifier.py", "solution": "solution.py",
                  "test_cases": "test_cases.json" if env.test_cases is not None else None,
                  "timeout": env.timeout, "case_timeout": env.case_timeout,
                  "shape": verifier_shape(env.verifier_source())}
        started = time.monotonic()
        done = subprocess.run(
            ["docker", "run", "--rm", "-i", "--init", "--network", "none", "--memory", "2g",
             "--memory-swap", "2g", "--pids-limit", "256", "--cpus", "1", "-v",
             f"{work}:/work:ro", "-w", "/work", image, "python3", "-I", "-S", "-B", RUNNER],
            input=(json.dumps(config) + "\n").encode(), capture_output=True,
            timeout=env.timeout + 60)
        outcome = CommandResult(exit_code=done.returncode, stdout=done.stdout,
                                stderr=done.stderr, duration=time.monotonic() - started)
    return interpret(outcome, token).score


def warm_against_fresh(image: str, runs: int) -> None:
    env = load_environment("coin_change")
    client = DeepGym(mode="docker", backend="threads", image=image)
    try:
        assert client.run(env, env.reference_solution).score == 1.0  # starts the container
        warm, fresh = [], []
        for _ in range(runs):  # alternate, so both see the same load
            started = time.monotonic()
            assert client.run(env, env.reference_solution).score == 1.0
            warm.append(time.monotonic() - started)
            started = time.monotonic()
            assert fresh_run(image, env, env.reference_solution) == 1.0
            fresh.append(time.monotonic() - started)
    finally:
        client.close()
    w, f = statistics.median(warm), statistics.median(fresh)
    print(f"one run, median of {runs}: warm container {w * 1000:.0f} ms, fresh docker run "
          f"{f * 1000:.0f} ms: warm/fresh = {w / f:.2f} (target <= 0.3)")


def throughput(client: DeepGym, env, answers: list[str], parallel: int) -> float:
    started = time.monotonic()
    batch = client.run_batch(env, answers, max_parallel=parallel)
    elapsed = time.monotonic() - started
    passed = [r.passed for r in batch.results]
    assert passed == [a == env.reference_solution for a in answers], batch.results
    return len(answers) / elapsed


def docker_against_local(image: str, n: int, parallel: int, rounds: int) -> None:
    env = load_environment("coin_change")
    answers = [env.reference_solution if i % 2 == 0 else WRONG for i in range(n)]
    docker = DeepGym(mode="docker", backend="threads", image=image)
    local = DeepGym(mode="local", backend="threads")
    try:
        for client in (docker, local):  # warm both: containers, fork server, zygote
            throughput(client, env, answers[:2 * parallel], parallel)
        rates = {"docker": [], "local": []}
        for _ in range(rounds):
            rates["docker"].append(throughput(docker, env, answers, parallel))
            rates["local"].append(throughput(local, env, answers, parallel))
    finally:
        docker.close()
        local.close()
    d, loc = max(rates["docker"]), max(rates["local"])
    print(f"{n} completions, {parallel} in parallel, best of {rounds}: docker {d:.1f} runs/s, "
          f"local {loc:.1f} runs/s: docker/local = {d / loc:.2f} (target >= 0.7)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="deepgym/python:3-bookworm")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warm_against_fresh(args.image, args.runs)
    docker_against_local(args.image, args.n, args.parallel, args.rounds)


if __name__ == "__main__":
    main()
