"""The reward contract's rule for agent episodes: which failures after the agent acted leave
no verdict, and which are the agent's 0.

Once the agent has acted, only a failure that is ours for certain has no verdict: what
:func:`~deepgym_ray.exceptions.is_infrastructure_failure` calls infrastructure (transport
errors, a provider call timing out, HTTP 5xx, 429, 401, 403, an evicted sandbox), a session
verifier that failed before it first read the agent's work directory (``VerifierError`` with
``in_play=False``), and a sandbox the provider retired at the end of its lifetime
(``SandboxExpiredError``), unless the agent's own actions took at least half the session's
time (``exhausted``). Anything else (a sandbox that died, a failed write, a failure this rule
cannot read) is the agent's 0. Every session path (the pool's, TRL's, verl's, HTTP) uses this
one function.

Example:
    >>> from deepgym_ray.exceptions import ProviderHTTPError, SandboxDiedError
    >>> failure_result(ProviderHTTPError(503), "sb-1").has_verdict
    False
    >>> failure_result(SandboxDiedError("gone"), "sb-1").reward
    0.0
    >>> agent_exhausted(agent_seconds=31.0, session_seconds=60.0)
    True
"""

from __future__ import annotations

import builtins

from deepgym_ray import contract
from deepgym_ray.exceptions import (
    SandboxExpiredError,
    VerifierError,
    describe_error,
    error_type_for,
    is_infrastructure_failure,
)
from deepgym_ray.masked_rate import MaskedRate
from deepgym_ray.models import RunResult

__all__ = ["EPISODES", "agent_exhausted", "failure_result", "record_episode"]

#: Every episode result this process settles (in-process sessions, and a pool's on the driver):
#: more than 5 of the last 100 without a verdict is logged as a warning.
EPISODES = MaskedRate(name="deepgym/sessions")


def record_episode(result: RunResult) -> RunResult:
    """Count an episode's one result in :data:`EPISODES`; returns it."""
    EPISODES.update([result])
    return result


def agent_exhausted(agent_seconds: float, session_seconds: float) -> bool:
    """Whether the agent's own actions took at least half the session's time: a sandbox that
    expired then ran out on the agent's account, not ours."""
    if session_seconds <= 0:
        return agent_seconds > 0
    return agent_seconds >= session_seconds / 2


def failure_result(exc: BaseException, sandbox_id: str | None = None,
                   exhausted: bool = False) -> RunResult:
    """The result of an episode that failed with ``exc`` after the agent acted.

    ``exhausted``: the agent's actions took at least half the session's time
    (:func:`agent_exhausted`), which makes an expired sandbox the agent's 0. The result has no
    verdict for a failure that is ours for certain, else it is the agent's judged 0
    (``policy_sandbox_failure``); its details name the failure and the side it fell on.
    """
    what = describe_error(exc)
    if isinstance(exc, SandboxExpiredError):
        if exhausted:
            return _agents_zero(f"{what} (the agent's actions took at least half the "
                                "session's time)", sandbox_id)
        return _no_verdict(exc, f"{what} (the session's time ran out while we held it)",
                           sandbox_id)
    if isinstance(exc, VerifierError) and exc.in_play:  # it had read the agent's work
        timed_out = isinstance(exc.__cause__, builtins.TimeoutError)
        return _agents_zero(f"{what} (after the verifier read the agent's work)", sandbox_id,
                            contract.SOLUTION_TIMEOUT if timed_out else contract.SOLUTION_ERROR)
    if is_infrastructure_failure(exc):
        return _no_verdict(exc, what, sandbox_id)
    return _agents_zero(what, sandbox_id)


def _no_verdict(exc: BaseException, details: str, sandbox_id: str | None) -> RunResult:
    return RunResult(score=0.0, passed=False, error_type=error_type_for(exc), details=details,
                     sandbox_id=sandbox_id or getattr(exc, "sandbox_id", None))


def _agents_zero(details: str, sandbox_id: str | None,
                 error_type: str = contract.POLICY_SANDBOX_FAILURE) -> RunResult:
    return RunResult(score=0.0, passed=False, error_type=error_type,
                     exit_code=contract.EXIT_FAILED, details=details, sandbox_id=sandbox_id)
