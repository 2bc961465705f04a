"""Repository tasks on the Docker engine: what a patch run costs beyond its tests, and how runs
in parallel compare with one at a time.

1. Overhead: each SWE fixture task's gold patch, ``--runs`` times; for every run, its whole
   time (``judge_patch``, from the first call to the container's removal) against the time of
   its test command alone (the ``docker exec`` of the tests). The overhead is the difference
   (target: <= 0.5 s).
2. Parallel: the 3 SWE and 3 Terminal-Bench fixture tasks plus 2 more SWE runs (8 runs) through
   one ``eval`` with 8 in flight, against the same 8 runs one at a time, in one process on
   threads (ratio: one at a time / parallel, on this machine's cores).
3. Image builds: a fresh recipe asked for by the 8 parallel runs is built once (the build
   count of this process's builder).

Usage:
    python bench/repo_tasks.py [--runs 5] [--image deepgym/python:3-bookworm]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.images.build import BUILDS
from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.sandboxes.docker import task_container
from deepgym_ray.suites.swebench import load_swebench
from deepgym_ray.suites.terminal_bench import load_terminal_bench

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


class TestTimer:
    """Records the duration of every command run as a non-root user (the tests)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._exec = task_container.TaskContainer.exec
        timer = self

        def exec_(box, argv, *, user, timeout, workdir="/", environment=None):
            result = timer._exec(box, argv, user=user, timeout=timeout, workdir=workdir,
                                 environment=environment)
            if user != "0":
                timer.durations.append(result.duration)
            return result

        task_container.TaskContainer.exec = exec_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default="deepgym/python:3-bookworm")
    args = parser.parse_args()

    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=args.image)
    swe = load_swebench(FIXTURES / "swe" / "tasks.jsonl", recipe=recipe, timeout=120)
    terminal = load_terminal_bench(FIXTURES / "terminal_bench", BASE_IMAGE=args.image)
    client = DeepGym(config=DeepGymConfig(mode="docker", backend="threads",
                                          provider_options={"image": args.image}))
    timer = TestTimer()
    client.run(swe[0], swe[0].patch_task.gold_patch)  # the image built, the engine warm

    overheads = []
    for _ in range(args.runs):
        for env in swe:
            timer.durations.clear()
            started = time.perf_counter()
            result = client.run(env, env.patch_task.gold_patch)
            whole = time.perf_counter() - started
            assert result.score == 1.0, result
            overheads.append(whole - timer.durations[-1])
    print(f"patch run overhead beyond the test command: median "
          f"{statistics.median(overheads):.2f}s, best {min(overheads):.2f}s "
          f"({len(overheads)} runs; target <= 0.5s)")

    fresh = ImageRecipe(dockerfile=f"FROM {recipe.tag}\nLABEL bench={uuid.uuid4().hex}\n")
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
