"""What an idle local Ray instance's own processes cost per minute, as the tests start it, with
Ray's defaults and with the settings tests/conftest.py gives every Ray of the test run.

Each round starts the instance in a subprocess (so that each gets the environment under test),
starts and ends ``--workers`` actors (each leaves its log files, as a test run's pools do), then
measures the CPU of every process of the instance (raylet, GCS, log monitor, agents,
dashboard, autoscaler monitor, and ``--alive`` idle actors) over ``--seconds``. The settings
(and ``--try``'s candidates) alternate, so a noisy machine slows each alike.

Example::

    .venv/bin/python bench/ray_instance_idle.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.ray_cluster import LOCAL_RAY_OPTIONS  # noqa: E402
from helpers.ray_cluster import QUIET_RAY as TEST_SETTINGS  # noqa: E402

PROCESSES = {"log monitor": "log_monitor.py", "dashboard agent": "ray::DashboardAgent",
             "runtime env agent": "ray::RuntimeEnvAgent", "raylet": "raylet/raylet",
             "gcs": "gcs_server", "dashboard": "dashboard/dashboard.py",
             "autoscaler monitor": "autoscaler/_private/monitor.py", "idle actors": "ray::Idle"}

ROUND = """
import json, os, sys, time
import psutil, ray
workers, alive_count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
kinds = json.loads(sys.argv[4])
ray.init(**json.loads(sys.argv[5]))

@ray.remote(num_cpus=0)
class Idle:
    def pid(self):
        return os.getpid()

for start in range(0, workers, 8):
    actors = [Idle.remote() for _ in range(min(8, workers - start))]
    ray.get([a.pid.remote() for a in actors])
    for actor in actors:
        ray.kill(actor)
# Actors left alive through the measurement, as a test run's session pools are.
alive = [Idle.remote() for _ in range(alive_count)]
ray.get([a.pid.remote() for a in alive])
time.sleep(3)
# A process is told by its first three words (python, -u, its script; the agents by the
# title they give themselves): a raylet's command line names the agents it starts.
found = {kind: [p for p in psutil.process_iter(["cmdline"])
                if pattern in " ".join((p.info["cmdline"] or [])[:3])]
         for kind, pattern in kinds.items()}
def cpu(procs):
    return sum(sum(p.cpu_times()[:2]) for p in procs)
before = {kind: cpu(procs) for kind, procs in found.items()}
time.sleep(seconds)
logs = len(os.listdir(ray._private.worker._global_node.get_logs_dir_path()))
print(json.dumps({"logs": logs, **{kind: (cpu(procs) - before[kind]) * 60 / seconds
                                   for kind, procs in found.items()}}))
"""


def one_round(settings: dict[str, str], workers: int, alive: int,
              seconds: float) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in TEST_SETTINGS and k != "RAY_ADDRESS"}
    env.update(settings)
    argv = [sys.executable, "-c", ROUND, str(workers), str(alive), str(seconds),
            json.dumps(PROCESSES), json.dumps(LOCAL_RAY_OPTIONS)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=40, help="actors started and ended first")
    parser.add_argument("--alive", type=int, default=0, help="idle actors kept while measured")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured idle time")
    parser.add_argument("--try", dest="candidate", action="append", default=[],
                        metavar="NAME=VALUE", help="also measure the tests' settings plus these")
    args = parser.parse_args()
    variants = {"Ray's defaults": {}, "the tests' settings": TEST_SETTINGS}
    if args.candidate:
        variants["with " + " ".join(args.candidate)] = {
            **TEST_SETTINGS, **dict(item.split("=", 1) for item in args.candidate)}
    totals: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, settings in variants.items():
            result = one_round(settings, args.workers, args.alive, args.seconds)
            logs = result.pop("logs")
            totals[name].append(sum(result.values()))
            print(f"{name}: {logs} log files, total {sum(result.values()):.2f} CPU-s/min\n  "
                  + "  ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
    means = {name: sum(values) / len(values) for name, values in totals.items()}
    default = means.pop("Ray's defaults")
    print(f"\nidle instance, Ray's defaults: {default:.2f} CPU-s per minute")
    for name, mean in means.items():
        print(f"  {name}: {mean:.2f} (ratio {mean / default:.2f})")


if __name__ == "__main__":
    main()
