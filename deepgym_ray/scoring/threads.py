"""The thread backend: score on this process's threads, at most ``max_parallel`` at once.

The one in-process alternative to the Ray pool (``backend="threads"``): results come back in
input order, and ``on_result(index, result)`` hears of each as soon as it is known, as with
the pool. Every input gets exactly one result; the scorer's ``run_safe`` never raises.

Example:
    results = map_threads(Scorer("local"), envs, codes, max_parallel=8)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from deepgym_ray.models import Environment, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.scoring.scorer import Scorer

__all__ = ["map_threads"]

OnResult = Callable[[int, RunResult], object]


def map_threads(scorer: Scorer, envs: Sequence[Environment], codes: Sequence[str],
                max_parallel: int, on_result: OnResult | None = None) -> list[RunResult]:
    """``scorer.run_safe(envs[i], codes[i])`` for every i, in input order."""
    if len(envs) != len(codes):
        raise ValueError(f"got {len(envs)} environments for {len(codes)} codes")
    results: list[RunResult | None] = [None] * len(codes)
    if not codes:
        return []
    workers = max(1, min(max_parallel, len(codes)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepgym") as pool:
        pending: dict[Future[RunResult], int] = {}
        todo = iter(range(len(codes)))
        # Submitted only as threads free up, so a Ctrl-C leaves at most max_parallel running.
        for index in todo:
            pending[pool.submit(scorer.run_safe, envs[index], codes[index])] = index
            if len(pending) >= workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                results[index] = future.result()
                if on_result is not None:
                    on_result(index, results[index])
                nxt = next(todo, None)
                if nxt is not None:
                    pending[pool.submit(scorer.run_safe, envs[nxt], codes[nxt])] = nxt
    return results  # type: ignore[return-value]  # every slot was filled above
