"""Agent episodes: a trivial step's round trip, many open sessions at once, memory per session.

1. **Step round trip.** On one warm session per provider, ``--steps`` steps of ``true``: the
   time ``Session.step`` takes, and our own overhead (that time minus the command's own run, as
   the step program measured it), median and 90th percentile. Targets: overhead <= 5 ms (local)
   and <= 30 ms (docker).
2. **Many sessions.** ``--sessions`` sessions opened on the Ray pool (local sandbox, 2 actors),
   each stepped once and scored, ``--width`` at a time: none lost (every one scored 1.0), and
   the actors' resident memory per open session (all open at once, before any is scored).

Usage:
    python bench/session_step.py [--steps 200] [--sessions 256] [--width 32]
        [--providers local docker] [--no-pool]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.models import Environment
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.sessions import Action

VERIFIER = '''
import os

def verify(work_dir, test_cases_path=None):
    with open(os.path.join(work_dir, "answer.txt")) as f:
        ok = f.read().strip() == "42"
    return {"score": 1.0 if ok else 0.0, "passed": ok}
'''
ENV = Environment(name="bench", verifier_code=VERIFIER, timeout=60, case_timeout=10,
                  multi_turn=MultiTurnTask(max_steps=10_000, timeout_per_step=60))
TRUE = Action(action_type="bash", content="true")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def step_round_trip(mode: str, steps: int) -> None:
    options = {"image": "deepgym/python:3-bookworm"} if mode == "docker" else {}
    client = DeepGym(mode=mode, backend="threads", **options)
    try:
        with client.session(ENV) as session:
            session.start()
            for _ in range(5):  # warm: the provider's helpers, the first imports
                session.step(TRUE)
            total, overhead = [], []
            for _ in range(steps):
                began = time.perf_counter()
                observation, _, _ = session.step(TRUE)
                spent = time.perf_counter() - began
                total.append(spent * 1000)
                overhead.append((spent - (observation.metadata["duration"] or 0.0)) * 1000)
        print(f"{mode:7s} step of `true`: {statistics.median(total):6.1f} ms median, "
              f"{_pct(total, 0.9):6.1f} ms p90; our overhead {statistics.median(overhead):6.1f} "
              f"ms median, {_pct(overhead, 0.9):6.1f} ms p90 ({steps} steps)")
    finally:
        client.close()


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def many_sessions(count: int, width: int) -> None:
    import ray

    from deepgym_ray.pool import get_pool

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    config = PoolConfig(name=f"bench-sessions-{uuid.uuid4().hex[:6]}", actors=2,
                        actor_concurrency=4, num_cpus_per_actor=0)
    client = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=config))
    try:
        pool = get_pool(client)
        pids = [s["pid"] for s in pool.stats()]
        before = _rss_mb(pids)
        began = time.perf_counter()
        with ThreadPoolExecutor(width) as threads:
            sessions = list(threads.map(lambda _: client.session(ENV), range(count)))
            list(threads.map(lambda s: s.start(), sessions))
            opened = time.perf_counter() - began
            open_now = sum(s["open_sessions"] for s in pool.stats())
            during = _rss_mb(pids)
            list(threads.map(lambda s: s.step(Action(action_type="bash",
                                                     content="echo 42 > answer.txt")),
                             sessions))
            results = list(threads.map(lambda s: s.score(), sessions))
        spent = time.perf_counter() - began
        passed = sum(r.passed for r in results)
        print(f"{count} sessions on the pool ({width} at a time): {open_now} open at once, "
              f"{passed} of {count} scored 1.0, {len(results) - passed} lost or failed; "
              f"opened in {opened:.1f} s, all done in {spent:.1f} s ({count / spent:.1f} "
              f"episodes/s)")
        print(f"actors' resident memory: {before:.0f} MB before, {during:.0f} MB with {open_now} "
              f"open: {(during - before) * 1024 / max(open_now, 1):.0f} kB per open session")
    finally:
        get_pool(client).shutdown()
        client.close()
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--providers", nargs="+", default=["local", "docker"])
    parser.add_argument("--no-pool", action="store_true")
    args = parser.parse_args()
    for mode in args.providers:
        step_round_trip(mode, args.steps)
    if not args.no_pool:
        many_sessions(args.sessions, args.width)


if __name__ == "__main__":
    main()
