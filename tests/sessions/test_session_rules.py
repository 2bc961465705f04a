"""The contract's rule for a failure once the agent has acted (deepgym_ray.sessions.rules), and
the episode's public shapes."""

from __future__ import annotations

import builtins

import pytest
from pydantic import ValidationError

import deepgym_ray
from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SandboxDiedError,
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
    VerifierError,
)
from deepgym_ray.sessions import (
    Action,
    Observation,
    Trajectory,
    TrajectoryStep,
    agent_exhausted,
    failure_result,
)


def _wrapped(inner: BaseException) -> BaseException:
    """``inner`` as a provider SDK reports it: a plain error of its own, the cause inside."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("sandbox call failed") from exc
    except RuntimeError as outer:
        return outer


OURS = [
    pytest.param(ProviderHTTPError(503, "unavailable"), "sandbox_error", id="5xx"),
    pytest.param(ProviderHTTPError(429, "slow down"), "sandbox_error", id="429"),
    pytest.param(ProviderHTTPError(401, "bad key"), "sandbox_error", id="401"),
    pytest.param(ProviderHTTPError(403, "forbidden"), "sandbox_error", id="403"),
    pytest.param(ProviderConnectionError("refused"), "sandbox_error", id="connection"),
    pytest.param(ProviderTimeoutError("no answer in 60 s"), "sandbox_error", id="call-timeout"),
    pytest.param(SandboxEvictedError("reclaimed"), "sandbox_error", id="evicted"),
    pytest.param(builtins.ConnectionResetError("reset"), "sandbox_error", id="transport"),
    pytest.param(_wrapped(builtins.ConnectionRefusedError("refused")), "runtime_error",
                 id="cause-chain"),
    pytest.param(VerifierError("crashed on import", in_play=False), "verifier_error",
                 id="verifier-before-it-read"),
]


@pytest.mark.parametrize(("exc", "error_type"), OURS)
def test_a_failure_that_is_ours_has_no_verdict(exc, error_type):
    result = failure_result(exc, "sb-1")
    assert not result.has_verdict and result.reward is None and not result.counts_as_passed
    assert result.error_type == error_type
    assert result.sandbox_id == "sb-1"
    assert type(exc).__name__ in result.details


AGENTS = [
    pytest.param(SandboxDiedError("the sandbox died"), "policy_sandbox_failure", id="died"),
    pytest.param(SandboxError("write failed: disk full"), "policy_sandbox_failure",
                 id="failed-write"),
    pytest.param(ProviderHTTPError(404, "no such file"), "policy_sandbox_failure", id="404"),
    pytest.param(KeyError("something unknown"), "policy_sandbox_failure", id="unknown"),
    pytest.param(VerifierError("crashed reading the work", in_play=True), "solution_error",
                 id="verifier-after-it-read"),
]


@pytest.mark.parametrize(("exc", "error_type"), AGENTS)
def test_anything_else_is_the_agents_zero(exc, error_type):
    result = failure_result(exc, "sb-2")
    assert result.has_verdict and result.reward == 0.0 and not result.passed
    assert result.error_type == error_type


def test_a_verifier_that_timed_out_after_reading_the_work_is_the_agents_timeout():
    try:
        try:
            raise builtins.TimeoutError("600 s")
        except builtins.TimeoutError as cause:
            raise VerifierError("timed out", in_play=True) from cause
    except VerifierError as exc:
        result = failure_result(exc, "sb-3")
    assert result.has_verdict and result.error_type == "solution_timeout"


def test_an_expired_sandbox_is_ours_unless_the_agent_took_half_the_time():
    expired = SandboxExpiredError("lifetime of 30 min reached", sandbox_id="sb-4")
    ours = failure_result(expired, None, exhausted=agent_exhausted(100.0, 1800.0))
    assert not ours.has_verdict and ours.error_type == "sandbox_error"
    assert ours.sandbox_id == "sb-4"  # taken from the error when not given
    agents = failure_result(expired, "sb-4", exhausted=agent_exhausted(900.0, 1800.0))
    assert agents.has_verdict and agents.reward == 0.0
    assert agents.error_type == "policy_sandbox_failure"
    assert "half" in agents.details


@pytest.mark.parametrize(("agent", "session", "exhausted"), [
    (0.0, 60.0, False), (29.9, 60.0, False), (30.0, 60.0, True), (59.0, 60.0, True),
    (0.0, 0.0, False), (0.1, 0.0, True),
])
def test_the_half_time_rule(agent, session, exhausted):
    assert agent_exhausted(agent, session) is exhausted


def test_the_rule_is_public_under_the_contracts_names():
    assert deepgym_ray.failure_result is failure_result
    assert deepgym_ray.Action is Action
    from deepgym_ray.sessions import is_infrastructure_failure

    assert is_infrastructure_failure is deepgym_ray.is_infrastructure_failure


# -- the shapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../x", "a/../../b", "/etc/passwd", "~/x", "", "dir/", ".",
                                  "a\\b", "C:x", "a\x00b", "x" * 5000])
def test_a_write_outside_the_work_directory_is_refused_naming_the_path(path):
    with pytest.raises(ValidationError, match="path"):
        Action(action_type="write_file", path=path, content="")


def test_a_relative_path_is_kept_in_plain_form():
    assert Action(action_type="write_file", path="./src//fix.py").path == "src/fix.py"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"action_type": "write_file", "content": "x"}, "needs a path"),
    ({"action_type": "bash", "content": "ls", "path": "a"}, "takes no path"),
    ({"action_type": "rm_rf", "content": "/"}, "action_type"),
    ({"action_type": "bash", "content": "ls", "shell": "zsh"}, "shell"),
])
def test_a_malformed_action_says_what_is_wrong(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        Action(**kwargs)


def test_a_trajectory_keeps_its_steps_and_rewards_in_order():
    steps = [TrajectoryStep(action=Action(action_type="bash", content=f"echo {i}"),
                            observation=Observation(content=f"{i}\n", step=i + 1),
                            reward=0.5 * i) for i in range(3)]
    trajectory = Trajectory(env_name="fix_the_bug", start=Observation(content="task", step=0),
                            steps=steps)
    assert trajectory.rewards == [0.0, 0.5, 1.0]
    again = Trajectory.model_validate_json(trajectory.model_dump_json())
    assert again == trajectory
    with pytest.raises(ValidationError, match="step"):
        Observation(content="", step=-1)
