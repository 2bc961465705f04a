"""The summary ``deepgym-ray eval`` prints at the end.

The headline numbers are the conservative ones (a run without a verdict counts as a failed 0);
the judged-only numbers and the no-verdict rate sit beside them, and each run without a verdict
is listed as ``ERROR (<error_type>)`` with its cause.

Example:
    >>> from deepgym_ray.models import EvalResult, RunResult
    >>> result = EvalResult(
    ...     results=[RunResult(score=1.0, passed=True), RunResult(error_type="sandbox_error",
    ...              details="provider unreachable")],
    ...     env_names=["a", "a"])
    >>> print(format_summary(result, ["a", "b"]))  # doctest: +NORMALIZE_WHITESPACE
    Runs: 2 (judged 1, no verdict 1)
    Pass Rate: 50.00% (judged 100.00%, 50.00% no verdict)
    Average Score: 0.5000 (judged 1.0000, 50.00% no verdict)
    pass@k (1 task, 2+ samples each; no verdict counts as failed): pass@1 50.00%, pass@2 100.00%
    No verdict:
      b: ERROR (sandbox_error) provider unreachable
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepgym_ray.cli.eval_metrics import breakdown, group_of, pass_at_k, samples_by_task
from deepgym_ray.cli.tracebacks import readable_error
from deepgym_ray.models import BatchResult, EvalResult, RunResult

__all__ = ["failure_reasons", "format_summary", "pass_rate_line", "run_line", "summary_dict"]

# A cause is cut to this many characters so one bad run cannot flood the summary.
MAX_CAUSE = 300
# ``run`` explains a failure with this many distinct errors, each cut to a few lines.
MAX_REASONS, MAX_REASON_LINES = 3, 4


def percent(value: float) -> str:
    return f"{100.0 * value:.2f}%"


def pass_rate_line(result: BatchResult) -> str:
    """``Pass Rate: 63.00% (judged 70.00%, 10.00% no verdict)``."""
    return (f"Pass Rate: {percent(result.pass_rate)} (judged {percent(result.judged_pass_rate)}"
            f", {percent(result.no_verdict_rate)} no verdict)")


def _average_line(result: BatchResult) -> str:
    return (f"Average Score: {result.avg_score:.4f} (judged {result.judged_avg_score:.4f}, "
            f"{percent(result.no_verdict_rate)} no verdict)")


def _cause(result: RunResult) -> str:
    text = " ".join(readable_error(result.details or "no details").split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


def run_line(result: RunResult, *, details: bool = True) -> str:
    """One run, as the console shows it: a score and PASS/FAIL, or ``ERROR (type)`` and cause
    (``details``: with the run's details, the exception first)."""
    if not result.has_verdict:
        return f"ERROR ({result.error_type or 'verifier_error'}) {_cause(result)}"
    status = "PASS" if result.passed else "FAIL"
    note = f" [{result.error_type}]" if result.error_type else ""
    shown = f" {_cause(result)}" if details and result.details else ""
    return f"{status} score={result.score:.4f}{note}{shown}"


def _first_lines(text: str) -> list[str]:
    text = readable_error(text)
    lines = [line.rstrip()[:MAX_CAUSE] for line in text.strip().splitlines() if line.strip()]
    return lines[:MAX_REASON_LINES] + (["..."] if len(lines) > MAX_REASON_LINES else [])


def failure_reasons(result: RunResult) -> list[str]:
    """Why a run did not pass, for a person: its error type, then the first lines of each
    distinct error its failing cases report (a syntax error, a timeout, a wrong value...)."""
    if result.passed and result.has_verdict:
        return []
    reasons = [f"error type: {result.error_type}"] if result.error_type else []
    failing = [case for case in result.cases or () if not case.passed]
    seen: dict[str, list[str]] = {}
    for case in failing:
        error = (case.model_extra or {}).get("error")
        if isinstance(error, str) and error.strip():
            seen.setdefault(error.strip(), []).append(case.id)
    for error, ids in list(seen.items())[:MAX_REASONS]:
        first, *rest = _first_lines(error)
        more = f" (and {len(ids) - 1} more case{'s' if len(ids) > 2 else ''})" if len(ids) > 1 \
            else ""
        reasons.append(f"{ids[0]}{more}: {first}")
        reasons.extend(f"    {line}" for line in rest)
    if not seen and result.details and result.has_verdict:
        reasons.extend(_first_lines(result.details))
    return reasons


def _pass_at_k_shown(values: dict[str, float]) -> dict[str, float]:
    """Every k up to 10, then 20, 50, 100, 200, ... and the largest: a line people can read."""
    ks = [int(key[5:]) for key in values]
    if not ks:
        return {}
    keep, step = set(range(1, 11)) | {max(ks)}, 10
    while step < max(ks):
        keep |= {2 * step, 5 * step, 10 * step}
        step *= 10
    return {f"pass@{k}": values[f"pass@{k}"] for k in ks if k in keep}


def _task_names(result: BatchResult) -> list[str]:
    names = getattr(result, "env_names", None)
    return list(names) if names else ["task"] * result.total


def _pass_at_k_lines(result: BatchResult, ks: Sequence[int] | None = None) -> list[str]:
    samples = samples_by_task(_task_names(result), result.results)
    if not samples or (ks is None and max(len(s) for s in samples.values()) < 2):
        return []
    fewest = min(len(s) for s in samples.values())
    values = pass_at_k(samples, ks) if ks else _pass_at_k_shown(pass_at_k(samples))
    shown = ", ".join(f"{key} {percent(value)}" for key, value in values.items())
    beyond = [k for k in ks or () if k > fewest]
    if beyond:  # asked for, but some task has fewer samples than k
        shown = ", ".join(filter(None, [shown, *(f"pass@{k} needs {k} samples a task" for k
                                                 in beyond)]))
    tasks = f"{len(samples)} task{'s' if len(samples) != 1 else ''}"
    return [f"pass@k ({tasks}, {fewest}+ sample{'s' if fewest != 1 else ''} each; no verdict "
            f"counts as failed): {shown}"]


MAX_ENVIRONMENT_ROWS = 40  # a longer per-environment table is in --json and --out


def _breakdown_lines(result: BatchResult) -> list[str]:
    """Per suite when there are several, and per environment (up to MAX_ENVIRONMENT_ROWS of
    them) when there are several, each table only when its rows add runs up: one row per
    run says nothing the lists below do not."""
    names = _task_names(result)
    lines: list[str] = []
    by_suite = breakdown([group_of(name) for name in names], result.results)
    by_env = breakdown(names, result.results)
    if 2 <= len(by_suite) < len(by_env) and _adds_up(by_suite):
        lines += ["By suite:", *_rows(by_suite)]
    if 2 <= len(by_env) <= MAX_ENVIRONMENT_ROWS and _adds_up(by_env):
        lines += ["By environment:", *_rows(by_env)]
    return lines


def _adds_up(table: dict[str, dict[str, Any]]) -> bool:
    return any(row["runs"] > 1 for row in table.values())


def _rows(table: dict[str, dict[str, Any]]) -> list[str]:
    width = max(len(name) for name in table)
    return [f"  {name:<{width}}  {row['passed']}/{row['runs']} passed "
            f"({percent(row['pass_rate'])}; judged {percent(row['judged_pass_rate'])}, "
            f"{row['no_verdict']} no verdict)" for name, row in table.items()]


def summary_dict(result: EvalResult, labels: Sequence[str], ks: Sequence[int] | None = None,
                 **extra: Any) -> dict[str, Any]:
    """The summary as plain data (``eval --json``): totals, pass@k (for ``ks``, default every
    k up to the fewest samples of a task), per environment and suite, and each run without a
    verdict."""
    names = _task_names(result)
    data: dict[str, Any] = dict(extra)
    data.update({key: getattr(result, key) for key in (
        "total", "judged", "no_verdict", "passed", "failed", "pass_rate", "judged_pass_rate",
        "no_verdict_rate", "avg_score", "judged_avg_score")})
    data["duration"] = result.duration
    data["pass_at_k"] = pass_at_k(samples_by_task(names, result.results), ks or None)
    data["by_environment"] = breakdown(names, result.results)
    data["by_suite"] = breakdown([group_of(n) for n in names], result.results)
    data["no_verdict_runs"] = [
        {"task": label, "error_type": run.error_type, "details": _cause(run)}
        for label, run in zip(labels, result.results, strict=True) if not run.has_verdict]
    return data


def format_summary(
    result: BatchResult, labels: Sequence[str], *, show_failures: bool = False,
    ks: Sequence[int] | None = None,
) -> str:
    """The end-of-eval summary. ``labels[i]`` names ``result.results[i]`` (its task id);
    pass@k shows for ``ks`` (default: when a task has several samples, every k up to 10 and
    round ones after), the breakdown when there are several environments or suites (an
    EvalResult's ``env_names``)."""
    lines = [
        f"Runs: {result.total} (judged {result.judged}, no verdict {result.no_verdict})",
        pass_rate_line(result),
        _average_line(result),
        *_pass_at_k_lines(result, ks),
        *_breakdown_lines(result),
    ]
    pairs = list(zip(labels, result.results, strict=True))
    failed = [(label, run) for label, run in pairs if run.has_verdict and not run.passed]
    if show_failures and failed:
        lines.append("Failed:")
        lines.extend(f"  {label}: {run_line(run)}" for label, run in failed)
    missing = [(label, run) for label, run in pairs if not run.has_verdict]
    if missing:
        lines.append("No verdict:")
        lines.extend(f"  {label}: {run_line(run)}" for label, run in missing)
    return "\n".join(lines)
