"""Agent episodes: a trivial step's round trip, many open sessions at once, memory per session.

1. **Step round trip.** On one warm session per provider, ``--steps`` steps of ``true``: the
   time ``Session.step`` takes, and our own overhead (that time minus the command's own run, as
   the step program measured it), median and 90th percentile. Targets: overhead <= 5 ms (local)
   and <= 30 ms (docker).
2. **Many sessions.** ``--sessions`` sessions opened on the Ray pool (local sandbox, 2 actors),
   each stepped once and scored, ``--width`` at a time: none lost (every one scored 1.0), and
   the actors' resident memory per open session (all open at once, before any is scored).
3. **Judging the work directory** (``--before REV``): a step of ``true`` in an episode with a
   step verifier (the verifier judges the work directory after every step) and ``score()``,
   on a work directory of ``--files`` small files, with this tree and with the tree of commit
   REV, side by side in alternating rounds (``trees.py``), per provider. Issue 63: the verifier
   reads a copy of the work directory made by the runner; before, a sweep of the agent's links
   ran as the agent first. Target: no worse than 1.2 times the tree before.

Usage:
    python bench/session_step.py [--steps 200] [--sessions 256] [--width 32]
        [--providers local docker] [--no-pool] [--before REV --files 50 --rounds 3]
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


# One tree's judging measurement, in a process of its own (see trees.py).
JUDGING = r"""
import json, os, statistics, sys, time
import deepgym_ray
from deepgym_ray.client import DeepGym
from deepgym_ray.models import Environment
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.sessions import Action
mode, steps, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
verifier = sys.argv[4]
work = {f"src/m{i}.py": b"x = 1\n" * 100 for i in range(files)}
env = Environment(name="bench-judging", verifier_code=verifier, timeout=60, case_timeout=10,
                  multi_turn=MultiTurnTask(files=work, max_steps=10_000, timeout_per_step=60,
                                           step_verifier=verifier))
options = {"image": "deepgym/python:3-bookworm"} if mode == "docker" else {}
client = DeepGym(mode=mode, backend="threads", **options)
true, answer = (Action(action_type="bash", content=c) for c in ("true", "echo 42 > answer.txt"))
with client.session(env) as session:
    session.start()
    session.step(answer)
    for _ in range(3):
        session.step(true)
    stepped = []
    for _ in range(steps):
        began = time.perf_counter()
        _, reward, _ = session.step(true)
        stepped.append((time.perf_counter() - began) * 1000)
        assert reward == 1.0, reward
scored = []
for _ in range(max(steps // 4, 3)):
    with client.session(env) as session:
        session.start()
        session.step(answer)
        began = time.perf_counter()
        assert session.score().score == 1.0
        scored.append((time.perf_counter() - began) * 1000)
client.close()
print(json.dumps({"package": os.path.dirname(deepgym_ray.__file__),
                  "step": statistics.median(stepped), "score": statistics.median(scored)}))
"""


def judging_against(before: str, providers: list[str], steps: int, files: int,
                    rounds: int) -> None:
    from trees import run_in, worktrees

    with worktrees(before) as trees:
        for mode in providers:
            best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
            for round_ in range(rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for name in order:
                    got = run_in(trees[name], JUDGING, mode, str(steps), str(files), VERIFIER)
                    for what in ("step", "score"):
                        best[name][what] = min(best[name].get(what, got[what]), got[what])
                    print(f"{mode:7s} round {round_ + 1} {name:6s}: a step with a step verifier "
                          f"{got['step']:6.1f} ms, score() {got['score']:6.1f} ms", flush=True)
            ratio = {what: best["after"][what] / best["before"][what] for what in best["after"]}
            print(f"{mode:7s} ({files} files, best medians of {rounds} rounds) before {before}: "
                  f"step {best['before']['step']:.1f} ms, score {best['before']['score']:.1f} "
                  f"ms; this tree: step {best['after']['step']:.1f} ms, score "
                  f"{best['after']['score']:.1f} ms; after/before: step {ratio['step']:.2f}, "
                  f"score {ratio['score']:.2f} (target <= 1.2)")


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
    parser.add_argument("--before", help="measure judging against this commit's tree only")
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.before:
        judging_against(args.before, args.providers, args.steps, args.files, args.rounds)
        return
    for mode in args.providers:
        step_round_trip(mode, args.steps)
    if not args.no_pool:
        many_sessions(args.sessions, args.width)


if __name__ == "__main__":
    main()
