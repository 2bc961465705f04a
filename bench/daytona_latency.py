"""Daytona provider throughput through the Ray pool against the local Daytona server with
latency added to every call: how close to the ideal rate, and at what CPU cost for the pool.

The server (tests/daytona_server, a subprocess) adds ``--latency`` seconds to every API call and
runs in replay mode: each distinct judge run executes for real once and is answered from that
run afterwards, so this machine's CPU does not stand in for the cloud's. A judge run on a warm
sandbox is two calls (upload, session command), so the ideal time for N runs at max_parallel P
is N / P * 2 * latency. A warm-up batch first creates the sandboxes (one per run in flight).
Scenario two answers 1% of the calls with 503: those runs are retried on another actor.

    .venv/bin/python bench/daytona_latency.py                 # 1,000 runs, P=200, 200 ms
    .venv/bin/python bench/daytona_latency.py --runs 200      # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_NODE_IP_ADDRESS", "127.0.0.1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keeps Ray on 127.0.0.1

CALLS_PER_RUN = 2  # bulk upload + session command, on a warm sandbox
FAULTY_CALLS = ("create", "home_dir", "session", "upload", "session_exec")


def start_server(latency: float, fail_rate: float) -> tuple[subprocess.Popen, dict]:
    # From tests/: the server is a test package (a top-level ``tests`` may be installed).
    args = [sys.executable, "-m", "daytona_server", "--port", "0", "--replay",
            "--latency", str(latency)]
    if fail_rate:
        rules = [{"call": c, "action": "status", "status": 503, "times": None, "rate": fail_rate}
                 for c in FAULTY_CALLS]
        spec = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115
        json.dump({"rules": rules}, spec)
        spec.close()
        args += ["--faults", spec.name]
    proc = subprocess.Popen(args, cwd=ROOT / "tests", stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (Ray's GCS, raylet and workers under the driver)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1]
                                               .split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [pid]
    while frontier:
        children = [c for c, p in parents.items() if p in frontier]
        found += children
        frontier = children
    return found


def scenario(name: str, runs: int, parallel: int, latency: float, fail_rate: float,
             backend: str = "ray") -> dict:
    from deepgym_ray import DeepGym, load_environment
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.pool import get_pool

    server, info = start_server(latency, fail_rate)
    try:
        env = load_environment("coin_change")
        wrong = "def coin_change(coins, amount):\n    return -1\n"
        answers = [env.reference_solution if i % 4 else wrong for i in range(runs)]
        config = DeepGymConfig(
            mode="daytona", max_parallel=parallel,
            provider_options={"api_key": info["api_key"], "api_url": info["url"],
                              "call_timeout": 30.0},
            pool=PoolConfig(name=f"bench-daytona-{name}", num_cpus_per_actor=0.25,
                            max_retries=3))
        client = DeepGym(config=config.model_copy(update={"backend": backend}))
        pool = get_pool(client) if backend == "ray" else _Threads(client)
        warm = list(pool.map(env, answers[:parallel], max_parallel=parallel))
        pids = [s["pid"] for s in pool.stats()]
        # Ray's own processes (GCS, raylet, idle workers): everything under this driver but
        # the actors and the server.
        ray_pids = [p for p in descendants(os.getpid()) if p not in pids and p != server.pid
                    and p not in descendants(server.pid)]
        cpu0 = sum(cpu_seconds(p) for p in pids)
        ray0 = sum(cpu_seconds(p) for p in ray_pids)
        driver0 = resource.getrusage(resource.RUSAGE_SELF)
        server0 = cpu_seconds(server.pid)
        started = time.monotonic()
        mapped = pool.map(env, answers, max_parallel=parallel)
        results = list(mapped)
        stats = getattr(mapped, "stats", None)
        wall = time.monotonic() - started
        driver1 = resource.getrusage(resource.RUSAGE_SELF)
        actors_cpu = sum(cpu_seconds(p) for p in pids) - cpu0
        ray_cpu = sum(cpu_seconds(p) for p in ray_pids) - ray0
        server_cpu = cpu_seconds(server.pid) - server0
        driver_cpu = (driver1.ru_utime + driver1.ru_stime) - (driver0.ru_utime + driver0.ru_stime)
        ideal = runs / parallel * CALLS_PER_RUN * latency
        right = [1.0 if i % 4 else 0.0 for i in range(runs)]
        out = {
            "scenario": name, "runs": runs, "max_parallel": parallel, "latency_s": latency,
            "fail_rate": fail_rate, "actors": len(pids), "wall_s": round(wall, 2),
            "ideal_s": round(ideal, 2), "ratio_of_ideal": round(ideal / wall, 3),
            "runs_per_s": round(runs / wall, 1),
            "pool_cpu_s": round(actors_cpu + driver_cpu, 2),
            "pool_cpu_ms_per_run": round(1000 * (actors_cpu + driver_cpu) / runs, 2),
            "pool_cpu_share_of_wall": round((actors_cpu + driver_cpu) / wall, 2),
            "server_cpu_s": round(server_cpu, 2),
            "ray_system_cpu_s": round(ray_cpu, 2),
            # What this machine can give in the time 0.8 of the ideal rate allows, per run,
            # against what a run took here (pool, Ray's own processes and the server).
            "cpu_budget_ms_per_run_at_0.8": round(1000 * (os.cpu_count() or 1) * ideal / 0.8
                                                  / runs, 2),
            "cpu_used_ms_per_run": round(1000 * (actors_cpu + driver_cpu + ray_cpu + server_cpu)
                                         / runs, 2),
            "one_result_per_input": len(results) == runs,
            "all_judged": all(r.has_verdict for r in results),
            # Every fourth answer is wrong: it fails (a partial score is fine), the rest pass.
            "scores_right": all(r.passed == bool(want) and (r.score == 1.0) == bool(want)
                                for r, want in zip(results, right, strict=True)),
            "retries": getattr(stats, "retries", None),
            "warmup_all_judged": all(r.has_verdict for r in warm),
        }
        pool.shutdown()
        return out
    finally:
        server.terminate()
        server.wait(30)


class _Threads:
    """The same calls as the pool's, on this process's threads (``--backend threads``)."""

    def __init__(self, client) -> None:
        self.client = client

    def map(self, env, answers, max_parallel):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_parallel) as threads:
            return list(threads.map(lambda a: self.client.run_safe(env, a), answers))

    def stats(self) -> list:
        return []

    def shutdown(self) -> None:
        self.client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--backend", choices=("ray", "threads"), default="ray")
    args = parser.parse_args()
    # A SIGTERM (timeout(1)) unwinds normally, so the server subprocess is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.backend == "threads":
        for name, rate in (("latency", 0.0), ("latency+1%503", 0.01)):
            print(json.dumps(scenario(name, args.runs, args.max_parallel, args.latency, rate,
                                      "threads")), flush=True)
        return
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        for name, rate in (("latency", 0.0), ("latency+1%503", 0.01)):
            print(json.dumps(scenario(name, args.runs, args.max_parallel, args.latency, rate)),
                  flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
