"""Repository tasks on the Docker engine: what a patch run and a Terminal-Bench run cost beyond
the commands that run the answer, and how runs in parallel compare with one at a time.

1. Overhead: each SWE fixture task's gold patch and each Terminal-Bench fixture task's reference
   script, ``--runs`` times; for every run, its whole time (from the first call to the last
   container's removal being handed off) against the time of the commands that run the answer
   (a patch run's test command; a Terminal-Bench run's script and ``tests/test.sh``, each a
   ``docker exec``). The overhead is the difference (a patch run's target: <= 0.5 s).
2. Parallel: the 3 SWE and 3 Terminal-Bench fixture tasks plus 2 more SWE runs (8 runs) through
   one ``eval`` with 8 in flight, against the same 8 runs one at a time, in one process on
   threads (ratio: one at a time / parallel, on this machine's cores).
3. Image builds: a fresh recipe asked for by the 8 parallel runs is built once (the build
   count of this process's builder).

``--before REV`` measures only (1), for this tree and for the tree of commit REV (a temporary git
worktree, ``trees.py``), alternating the two ``--rounds`` times in fresh processes so that the
machine's load falls on both alike, and prints them side by side.

Usage:
    python bench/repo_tasks.py [--runs 5] [--image deepgym/python:3-bookworm]
    python bench/repo_tasks.py --before REV [--runs 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import deepgym_ray
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.images.build import BUILDS
from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.sandboxes.docker import task_container
from deepgym_ray.suites.swebench import load_swebench
from deepgym_ray.suites.terminal_bench import load_terminal_bench

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# The commands that run the answer: a patch run's tests (as a user other than root), a
# Terminal-Bench run's script and its tests.
ANSWER_COMMANDS = ("/deepgym-run/solve.sh", "/tests/test.sh")


class AnswerTimer:
    """Records the duration of every command that runs the answer (see ANSWER_COMMANDS)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._exec = task_container.TaskContainer.exec
        timer = self

        def exec_(box, argv, *, user, timeout, workdir="/", environment=None, **more):
            result = timer._exec(box, argv, user=user, timeout=timeout, workdir=workdir,
                                 environment=environment, **more)
            if user != "0" or any(arg in ANSWER_COMMANDS for arg in argv):
                timer.durations.append(result.duration)
            return result

        task_container.TaskContainer.exec = exec_


def overheads(client, envs, runs: int, timer: AnswerTimer) -> tuple[list[float], list[float]]:
    """Each run's time beyond its answer's commands, and its whole time."""
    beyond, whole = [], []
    for _ in range(runs):
        for env in envs:
            timer.durations.clear()
            started = time.perf_counter()
            result = client.run(env, env.reference_solution)
            took = time.perf_counter() - started
            assert result.score == 1.0, result
            beyond.append(took - sum(timer.durations))
            whole.append(took)
    return beyond, whole


def measure(args) -> tuple[DeepGym, list, list, dict[str, list[float]]]:
    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=args.image)
    swe = load_swebench(FIXTURES / "swe" / "tasks.jsonl", recipe=recipe, timeout=120)
    terminal = load_terminal_bench(FIXTURES / "terminal_bench", BASE_IMAGE=args.image)
    client = DeepGym(config=DeepGymConfig(mode="docker", backend="threads",
                                          provider_options={"image": args.image}))
    timer = AnswerTimer()
    for env in (swe[0], terminal[0]):  # the images built, the engine warm
        client.run(env, env.reference_solution)
    found = {}
    found["patch"], found["patch whole"] = overheads(client, swe, args.runs, timer)
    found["terminal"], found["terminal whole"] = overheads(client, terminal, args.runs, timer)
    return client, swe, terminal, found


def against(args) -> None:
    from trees import worktrees

    with worktrees(args.before) as trees:
        runs = _alternate(args, trees)
    print(f"{'median seconds (runs)':<28}{args.before:>14}{'this tree':>16}{'ratio':>8}")
    for key in runs["before"]:
        before, after = (statistics.median(runs[k][key]) for k in ("before", "after"))
        print(f"{key:<28}{before:>9.2f} ({len(runs['before'][key])}){after:>11.2f} "
              f"({len(runs['after'][key])}){after / before:>7.2f}x")


def _alternate(args, trees: dict[str, Path]) -> dict[str, dict[str, list[float]]]:
    """The overheads of ``--rounds`` rounds, each measuring the tree before and this one, in
    fresh processes (alternating which goes first)."""
    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for round_ in range(args.rounds):
        for label in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
            env = dict(os.environ, PYTHONPATH=str(trees[label]))
            out = subprocess.run([sys.executable, __file__, "--overheads-json", "--runs",
                                  str(args.runs), "--image", args.image], env=env, check=True,
                                 capture_output=True, text=True).stdout
            found = json.loads(out.splitlines()[-1])
            package = found.pop("package")[0]
            assert package.startswith(str(trees[label])), (label, package)  # the tree asked
            for key, values in found.items():
                runs[label].setdefault(key, []).extend(values)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image", default="deepgym/python:3-bookworm")
    parser.add_argument("--before", help="measure (1) only, against this commit's tree")
    parser.add_argument("--overheads-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before:
        against(args)
        return
    client, swe, terminal, found = measure(args)
    if args.overheads_json:
        client.close()
        print(json.dumps({"package": [deepgym_ray.__file__], **found}))
        return
    for key in ("patch", "terminal"):
        print(f"{key} run overhead beyond the answer's commands: median "
              f"{statistics.median(found[key]):.2f}s, best {min(found[key]):.2f}s "
              f"({len(found[key])} runs{'; target <= 0.5s' if key == 'patch' else ''})")

    fresh = ImageRecipe(dockerfile=f"FROM {swe[0].image_recipe.tag}\n"
                        f"LABEL bench={uuid.uuid4().hex}\n")
    fresh_swe = load_swebench(FIXTURES / "swe" / "tasks.jsonl", recipe=fresh, timeout=120)
    envs = fresh_swe + terminal + fresh_swe[:2]
    answers = [e.reference_solution for e in envs]
    started = time.perf_counter()
    batch = client.eval(envs, max_parallel=8)  # each one's reference solution
    parallel = time.perf_counter() - started
    assert [r.score for r in batch.results] == [1.0] * 8, batch.results
    started = time.perf_counter()
    for env, answer in zip(envs, answers, strict=True):
        assert client.run(env, answer).score == 1.0
    serial = time.perf_counter() - started
    print(f"8 fixture tasks: {parallel:.1f}s with 8 in flight, {serial:.1f}s one at a time "
          f"(ratio {serial / parallel:.2f}x)")
    print(f"builds of the fresh recipe asked for by 8 runs at once: {BUILDS[fresh.tag]}")
    client.close()


if __name__ == "__main__":
    main()
