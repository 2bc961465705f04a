"""Faults in agent episodes, each with the contract's outcome (``deepgym_ray.sessions.rules``)
and exactly one result per episode: a sandbox that expires while the agent stalls (its 0) or
while the host stalls (no verdict); one that dies before the agent's first action (no verdict)
or after it (its 0); a verifier that times out before it reads the work directory (no verdict)
or after (its 0); the actor holding the episode killed mid-episode (no verdict, no hang)."""

from __future__ import annotations

import time
import uuid

import pytest
from helpers.episodes import ANSWER_VERIFIER, RIGHT, answer_env

from deepgym_ray import contract
from deepgym_ray.exceptions import SandboxDiedError, SandboxError, SandboxExpiredError
from deepgym_ray.judge import STEP
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import ForwardingProvider
from deepgym_ray.sessions import Action, Session

STALL = 4.0  # seconds an agent's command, or the host, stalls


def env(verifier: str = ANSWER_VERIFIER, timeout: float = 30) -> Environment:
    return answer_env(verifier, name="episode", timeout=timeout, timeout_per_step=30)


class Faulty(ForwardingProvider):
    """The local provider, with a fault at the ``at``-th step request (1 = the session's
    first request, which writes the agent's files): ``raise_`` raised there, after the host
    stalled ``host_stall`` seconds."""

    def __init__(self, inner, at: int, raise_: Exception, host_stall: float = 0.0) -> None:
        super().__init__(inner)
        self.at, self.raise_, self.host_stall = at, raise_, host_stall
        self.steps = 0

    def run(self, sandbox, command, **kwargs):
        if list(command)[-1:] == [STEP]:
            self.steps += 1
            if self.steps == self.at:
                time.sleep(self.host_stall)
                raise self.raise_
        return self.inner.run(sandbox, command, **kwargs)


def one_result(session: Session):
    result = session.score()
    assert session.score() is result and session.trajectory.result is result
    assert session.sandbox is None  # torn down
    return result


def test_expired_while_the_agent_stalled_is_its_zero(local_client):
    provider = Faulty(local_client.scorer.provider, at=3,
                      raise_=SandboxExpiredError("the sandbox reached its lifetime"))
    session = Session(provider, env())
    session.start()
    session.step(Action(action_type="bash", content=f"sleep {STALL}; echo 42 > answer.txt"))
    observation, _, done = session.step(Action(action_type="bash", content="cat answer.txt"))
    assert done and "half the session's time" in observation.content
    result = one_result(session)
    assert result.has_verdict and result.score == 0.0
    assert result.error_type == contract.POLICY_SANDBOX_FAILURE


def test_expired_while_the_host_stalled_has_no_verdict(local_client):
    provider = Faulty(local_client.scorer.provider, at=3, host_stall=STALL,
                      raise_=SandboxExpiredError("the sandbox reached its lifetime"))
    session = Session(provider, env())
    session.start()
    session.step(RIGHT)
    _, _, done = session.step(Action(action_type="bash", content="cat answer.txt"))
    assert done
    result = one_result(session)
    assert not result.has_verdict and "while we held it" in result.details


def test_died_before_the_first_action_has_no_verdict(local_client):
    provider = Faulty(local_client.scorer.provider, at=1, raise_=SandboxDiedError("gone"))
    session = Session(provider, env())
    with pytest.raises(SandboxDiedError):
        session.start()
    result = one_result(session)
    assert not result.has_verdict and result.error_type == contract.SANDBOX_ERROR


def test_died_after_the_first_action_is_the_agents_zero(local_client):
    provider = Faulty(local_client.scorer.provider, at=2, raise_=SandboxDiedError("gone"))
    session = Session(provider, env())
    session.start()
    observation, reward, done = session.step(RIGHT)
    assert done and reward is None and observation.metadata["error"] == \
        contract.POLICY_SANDBOX_FAILURE
    result = one_result(session)
    assert result.has_verdict and result.score == 0.0


def test_an_outage_of_the_provider_mid_episode_has_no_verdict(local_client):
    from deepgym_ray.exceptions import ProviderHTTPError

    provider = Faulty(local_client.scorer.provider, at=2, raise_=ProviderHTTPError(503))
    session = Session(provider, env())
    session.start()
    assert session.step(RIGHT)[2]
    assert not one_result(session).has_verdict


SLOW_EARLY = "import time\n\ndef verify(work_dir, test_cases_path=None):\n    time.sleep(60)\n"
SLOW_LATE = ("import os, time\n\ndef verify(work_dir, test_cases_path=None):\n"
             "    os.listdir(work_dir)\n    time.sleep(60)\n")


@pytest.mark.parametrize(("verifier", "verdict"), [(SLOW_EARLY, False), (SLOW_LATE, True)],
                         ids=["before_reading", "after_reading"])
def test_a_verifier_timing_out(local_client, verifier, verdict):
    session = Session(local_client.scorer.provider, env(verifier, timeout=2))
    session.start()
    session.step(RIGHT)
    result = one_result(session)
    assert result.has_verdict is verdict and result.score == 0.0, result
    if verdict:
        assert result.error_type == contract.SOLUTION_TIMEOUT


def _wait_until_restarted(ray, actor, old_pid: int, timeout: float = 180.0) -> None:
    """Return once ``actor`` answers from a process other than ``old_pid`` (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ray.get(actor.manifest.remote(), timeout=30)["pid"] != old_pid:
                return
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass  # dying or starting again
        time.sleep(0.1)
    raise AssertionError(f"the actor of pid {old_pid} was not restarted in {timeout:.0f}s")


def test_the_actor_holding_an_episode_killed_mid_episode(ray_local):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.pool import get_pool

    config = PoolConfig(name=f"episodes-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=2,
                        num_cpus_per_actor=0, max_retries=0)
    client = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=config))
    try:
        session = client.session(env())
        session.start()
        session.step(RIGHT)
        before = ray_local.get(session.actor.manifest.remote(), timeout=120)["pid"]
        ray_local.kill(session.actor, no_restart=False)  # Ray restarts it: the episode is gone
        # The kill goes through Ray's control plane while a call goes straight to the actor: a
        # step sent at once can still reach the old process and succeed (seen on a quiet run).
        # The step that must find the episode gone is sent once the new process answers.
        _wait_until_restarted(ray_local, session.actor, before)
        observation, reward, done = session.step(Action(action_type="bash", content="ls"))
        assert done and reward is None and "error" in observation.metadata
        result = session.score()
        assert not result.has_verdict and session.score() is result
        fresh = client.session(env())  # the pool takes new episodes (on either actor)
        fresh.start()
        fresh.step(RIGHT)
        assert fresh.score().passed
    finally:
        get_pool(client).shutdown()
        client.close()


def test_a_provider_error_the_rule_cannot_read_is_the_agents_zero(local_client):
    provider = Faulty(local_client.scorer.provider, at=2, raise_=SandboxError("odd"))
    session = Session(provider, env())
    session.start()
    session.step(RIGHT)
    result = one_result(session)
    assert result.has_verdict and result.score == 0.0
