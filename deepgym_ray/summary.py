"""The summary ``deepgym-ray eval`` prints at the end.

The headline numbers are the conservative ones (a run without a verdict counts as a failed 0);
the judged-only numbers and the no-verdict rate sit beside them, and each run without a verdict
is listed as ``ERROR (<error_type>)`` with its cause.

Example:
    >>> from deepgym_ray.models import EvalResult, RunResult
    >>> result = EvalResult(
    ...     results=[RunResult(score=1.0, passed=True), RunResult(error_type="sandbox_error",
    ...              details="provider unreachable")],
    ...     env_names=["a", "b"])
    >>> print(format_summary(result, ["a", "b"]))  # doctest: +NORMALIZE_WHITESPACE
    Runs: 2 (judged 1, no verdict 1)
    Pass Rate: 50.00% (judged 100.00%, 50.00% no verdict)
    Average Score: 0.5000 (judged 1.0000, 50.00% no verdict)
    No verdict:
      b: ERROR (sandbox_error) provider unreachable
"""

from __future__ import annotations

from collections.abc import Sequence

from deepgym_ray.models import BatchResult, RunResult

__all__ = ["format_summary", "pass_rate_line", "run_line"]

# A cause is cut to this many characters so one bad run cannot flood the summary.
MAX_CAUSE = 300


def _percent(value: float) -> str:
    return f"{100.0 * value:.2f}%"


def pass_rate_line(result: BatchResult) -> str:
    """``Pass Rate: 63.00% (judged 70.00%, 10.00% no verdict)``."""
    return (f"Pass Rate: {_percent(result.pass_rate)} (judged {_percent(result.judged_pass_rate)}"
            f", {_percent(result.no_verdict_rate)} no verdict)")


def _average_line(result: BatchResult) -> str:
    return (f"Average Score: {result.avg_score:.4f} (judged {result.judged_avg_score:.4f}, "
            f"{_percent(result.no_verdict_rate)} no verdict)")


def _cause(result: RunResult) -> str:
    text = " ".join((result.details or "no details").split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


def run_line(result: RunResult) -> str:
    """One run, as the console shows it: a score and PASS/FAIL, or ``ERROR (type)`` and cause."""
    if not result.has_verdict:
        return f"ERROR ({result.error_type or 'verifier_error'}) {_cause(result)}"
    status = "PASS" if result.passed else "FAIL"
    note = f" [{result.error_type}]" if result.error_type else ""
    details = f" {_cause(result)}" if result.details else ""
    return f"{status} score={result.score:.4f}{note}{details}"


def format_summary(
    result: BatchResult, labels: Sequence[str], *, show_failures: bool = False
) -> str:
    """The end-of-eval summary. ``labels[i]`` names ``result.results[i]`` (its task id)."""
    lines = [
        f"Runs: {result.total} (judged {result.judged}, no verdict {result.no_verdict})",
        pass_rate_line(result),
        _average_line(result),
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
