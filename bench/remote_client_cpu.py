"""Client CPU per remote run, per provider: what the pool's processes (its actors, with the
provider's SDK in them, and the driver) spend on one judge run, at 200 runs in flight.

Each provider runs against its local test server (tests/daytona_server, tests/e2b_server,
tests/modal_server) started as a subprocess, so that the server's CPU and its sandboxes' are
measured apart and left out: only the pool's is the client's. Every call waits ``--latency``
seconds in the server, as over a network. Each server answers a judge run seen before from its
first real run (``--replay``), so that the sandboxes do not take the machine's cores while the
client is measured. A warm-up batch makes the sandboxes first (and a right and a wrong run
after it give the server the runs to replay); then ``--runs`` answers (one
in four wrong) go through the pool at ``--max-parallel``, the providers one after another on
one Ray instance, in rounds, alternating.

    .venv/bin/python bench/remote_client_cpu.py                       # 1,000 runs, P=200
    .venv/bin/python bench/remote_client_cpu.py --runs 400 --rounds 1
    .venv/bin/python bench/remote_client_cpu.py --backend threads --max-parallel 100  # no Ray
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from daytona_latency import cpu_seconds  # noqa: E402 - the bench beside this one

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_NODE_IP_ADDRESS", "127.0.0.1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keeps Ray on 127.0.0.1
os.environ.setdefault("MODAL_CONFIG_PATH", "/nonexistent/deepgym-bench/modal.toml")

SERVERS = {  # provider -> its test server's command line (from tests/)
    "daytona": ["daytona_server", "--port", "0", "--replay", "--user", "daytona",
                "--sudo", "nopasswd"],
    "e2b": ["e2b_server", "--replay"],
    "modal": ["modal_server", "--replay"],
}


def start_server(provider: str, latency: float) -> tuple[subprocess.Popen, dict]:
    args = [sys.executable, "-m", *SERVERS[provider], "--latency", str(latency)]
    proc = subprocess.Popen(args, cwd=ROOT / "tests", stdout=subprocess.PIPE, text=True)
    info = json.loads(proc.stdout.readline())
    if provider == "daytona":  # its CLI prints its address and key
        info = {"api_key": info["api_key"], "api_url": info["url"]}
    return proc, info


def measure(provider: str, runs: int, parallel: int, latency: float) -> dict:
    from deepgym_ray import DeepGym, load_environment
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.pool import get_pool

    server, options = start_server(provider, latency)
    try:
        env = load_environment("coin_change")
        wrong = "def coin_change(coins, amount):\n    return -1\n"
        answers = [env.reference_solution if i % 4 else wrong for i in range(runs)]
        config = DeepGymConfig(
            mode=provider, max_parallel=parallel,
            provider_options={**options, "call_timeout": 60.0},
            pool=PoolConfig(name=f"bench-{provider}-{os.getpid()}-{time.monotonic_ns()}",
                            num_cpus_per_actor=0.25, max_retries=3))
        pool = get_pool(DeepGym(config=config))
        warm = list(pool.map(env, answers[:parallel], max_parallel=parallel))
        # A sandbox's first run carries the judge's files, which a server cannot replay by:
        # one right and one wrong run on warm sandboxes, so that every measured run is known.
        warm += pool.map(env, [env.reference_solution, wrong], max_parallel=1)
        pids = [s["pid"] for s in pool.stats()]
        actors0 = sum(cpu_seconds(p) for p in pids)
        driver0 = resource.getrusage(resource.RUSAGE_SELF)
        server0 = cpu_seconds(server.pid)
        started = time.monotonic()
        results = list(pool.map(env, answers, max_parallel=parallel))
        wall = time.monotonic() - started
        driver1 = resource.getrusage(resource.RUSAGE_SELF)
        actors = sum(cpu_seconds(p) for p in pids) - actors0
        driver = (driver1.ru_utime + driver1.ru_stime) - (driver0.ru_utime + driver0.ru_stime)
        right = [1.0 if i % 4 else 0.0 for i in range(runs)]
        out = {
            "provider": provider, "runs": runs, "max_parallel": parallel, "latency_s": latency,
            "actors": len(pids), "wall_s": round(wall, 1), "runs_per_s": round(runs / wall, 1),
            "client_cpu_ms_per_run": round(1000 * (actors + driver) / runs, 2),
            "actors_ms_per_run": round(1000 * actors / runs, 2),
            "driver_ms_per_run": round(1000 * driver / runs, 2),
            "server_process_cpu_s": round(cpu_seconds(server.pid) - server0, 1),
            "all_judged_and_right": len(results) == runs and all(
                r.has_verdict and r.passed == bool(want)
                for r, want in zip(results, right, strict=True)),
            "warmup_all_judged": all(r.has_verdict for r in warm),
        }
        pool.shutdown()
        return out
    finally:
        server.terminate()
        server.wait(60)


def measure_threads(provider: str, runs: int, parallel: int, latency: float) -> dict:
    """As :func:`measure`, in this process on the thread backend: the provider and its SDK
    alone, without Ray's per-task work (this process's CPU is the client's)."""
    from deepgym_ray import DeepGym, load_environment
    from deepgym_ray.config import DeepGymConfig

    server, options = start_server(provider, latency)
    try:
        env = load_environment("coin_change")
        wrong = "def coin_change(coins, amount):\n    return -1\n"
        answers = [env.reference_solution if i % 4 else wrong for i in range(runs)]
        client = DeepGym(config=DeepGymConfig(
            mode=provider, backend="threads", max_parallel=parallel,
            provider_options={**options, "call_timeout": 60.0}))
        warm = client.score_outputs([env] * parallel, answers[:parallel], parallel)
        warm += client.score_outputs([env] * 2, [env.reference_solution, wrong], 1)
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        results = client.score_outputs([env] * runs, answers, parallel)
        wall, after = time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        client.close()
        return {
            "provider": provider, "backend": "threads", "runs": runs, "max_parallel": parallel,
            "latency_s": latency, "wall_s": round(wall, 1), "runs_per_s": round(runs / wall, 1),
            "client_cpu_ms_per_run": round(1000 * cpu / runs, 2),
            "all_judged_and_right": len(results) == runs and all(
                r.has_verdict and r.passed == bool(i % 4) for i, r in enumerate(results)),
            "warmup_all_judged": all(r.has_verdict for r in warm),
        }
    finally:
        server.terminate()
        server.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--providers", default="daytona,e2b,modal")
    parser.add_argument("--backend", choices=("ray", "threads"), default="ray",
                        help="threads: in this process, the provider's own CPU without Ray's")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the servers are stopped too
    providers = args.providers.split(",")
    if args.backend == "threads":
        for round_ in range(args.rounds):
            for provider in providers if round_ % 2 == 0 else providers[::-1]:
                result = measure_threads(provider, args.runs, args.max_parallel, args.latency)
                print(json.dumps({"round": round_ + 1, **result}), flush=True)
        return
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        for round_ in range(args.rounds):
            order = providers if round_ % 2 == 0 else providers[::-1]
            for provider in order:
                result = measure(provider, args.runs, args.max_parallel, args.latency)
                print(json.dumps({"round": round_ + 1, **result}), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
