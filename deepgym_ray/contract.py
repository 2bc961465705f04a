"""The reward contract: which runs carry a verdict, and which scores may become reward.

A verdict is the verifier's judgement of the policy's answer. A run has none when something
other than the answer went wrong (the sandbox, the provider, the verifier itself), because
training on such a run would punish the policy for an outage.

Example:
    >>> is_verdict(exit_code=1, error_type="solution_timeout")
    True
    >>> is_verdict(exit_code=None, error_type="sandbox_error")
    False
    >>> check_score(float("nan"))
    'score is NaN'
"""

from __future__ import annotations

import math
from collections.abc import Mapping

# Failures the policy caused itself: judged 0s it should learn from.
MODEL_FAULT_ERRORS: frozenset[str] = frozenset(
    {
        "invalid_patch",
        "patch_apply_failed",
        "test_infra_tampering",
        "policy_sandbox_failure",
        "solution_timeout",
        "solution_error",
    }
)

# The error types this project produces itself. Anything not in MODEL_FAULT_ERRORS has no
# verdict, including error types we do not know.
SANDBOX_ERROR = "sandbox_error"
RUNTIME_ERROR = "runtime_error"
VERIFIER_ERROR = "verifier_error"
TIMEOUT = "timeout"
INVALID_SCORE = "invalid_score"
# A repository task's image could not be built: no run that needed it judged anything, and
# running it again elsewhere would build the same failure.
IMAGE_BUILD_ERROR = "image_build_error"
# The run's caller gave up on it and its processes were stopped: it judged nothing.
CANCELLED = "cancelled"
SESSION_ABANDONED = "session_abandoned"  # an agent's episode given up before its verdict
SESSION_IDLE = "session_idle_timeout"  # an agent's episode nobody called for too long: reaped
SOLUTION_ERROR = "solution_error"
SOLUTION_TIMEOUT = "solution_timeout"
POLICY_SANDBOX_FAILURE = "policy_sandbox_failure"

# The verifier's exit codes.
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_VERIFIER_ERROR = 2

# Float noise tolerated at the edges of [0, 1]; a score inside it is clamped, not rejected.
SCORE_TOLERANCE = 1e-6


def is_verdict(exit_code: int | None, error_type: str | None) -> bool:
    """Whether a run with this exit code and error type judged the answer.

    Exit code 2 (the verifier reporting its own failure) is never a verdict. Otherwise a run
    is a verdict when it has no error type, or when its error type is a model fault.
    """
    if exit_code == EXIT_VERIFIER_ERROR:
        return False
    return error_type is None or error_type in MODEL_FAULT_ERRORS


def check_score(score: object) -> str | None:
    """Return why ``score`` can never be reward, or None when it is a valid score in [0, 1]."""
    if type(score) is float and 0.0 <= score <= 1.0:  # the usual case (NaN fails both)
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return f"score must be a number, got {type(score).__name__}"
    value = float(score)
    if math.isnan(value):
        return "score is NaN"
    if math.isinf(value):
        return f"score is {value}"
    if value < -SCORE_TOLERANCE or value > 1 + SCORE_TOLERANCE:
        return f"score {value!r} is outside [0, 1]"
    return None


def clamp_score(score: float) -> float:
    """Clamp a score that passed :func:`check_score` into exactly [0, 1]."""
    return min(1.0, max(0.0, float(score)))


def check_components(components: Mapping[str, object] | None) -> str | None:
    """Return why reward components are unusable (a non-finite or non-numeric value), or None."""
    if components is None:
        return None
    for name, value in components.items():
        if not isinstance(name, str) or not name:
            return f"reward component name {name!r} must be a non-empty string"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"reward component {name!r} must be a number, got {type(value).__name__}"
        if not math.isfinite(float(value)):
            return f"reward component {name!r} is {value}"
    return None
