"""Agent episodes end to end, on the local sandbox and on Docker: the built-in multi-turn
environments' reference actions score 1.0 and a lazy agent a judged 0; the agent's errors go back
to it and the episode goes on; the contract's rules date a failing verifier; every episode has
one result."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from helpers.episodes import ANSWER_VERIFIER, answer_env

from deepgym_ray import contract
from deepgym_ray.envs import multi_turn_names
from deepgym_ray.exceptions import ProviderUnavailableError, SandboxError, VerifierError
from deepgym_ray.judge.deepgym_proc import uid_processes
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.sessions import Action, Session, SessionStateError
from deepgym_ray.suites import load_environment


@pytest.fixture(params=["local", "docker"])
def client(request):
    """A client of each provider sessions run on (Docker's skips, with its reason, where no
    engine or image is here: a failure in CI)."""
    return request.getfixturevalue(f"{request.param}_client")


def bash(command: str) -> Action:
    return Action(action_type="bash", content=command)


DONE = Action(action_type="done")


@pytest.mark.parametrize("name", multi_turn_names())
def test_the_reference_actions_score_full_marks_and_doing_nothing_a_judged_zero(
        client, name):
    env = load_environment(name)
    actions = [Action(**a) for a in json.loads(env.reference_solution)]
    with client.session(env) as session:
        first = session.start()
        assert first.step == 0 and env.task.strip()[:40] in first.content
        for action in actions:
            observation, _reward, done = session.step(action)
            assert "error:" not in observation.content, observation.content
        assert done
        result = session.score()
    assert result.score == 1.0 and result.passed, result.details
    assert [s.action for s in session.trajectory.steps] == actions
    assert session.trajectory.result == result

    lazy = client.run_episode(env, lambda observation: {"action_type": "done"})
    assert lazy.has_verdict and lazy.score < 1.0 and not lazy.passed, lazy


def test_the_agent_works_in_its_files_and_setup_ran_first(client):
    env = answer_env(setup="mkdir -p made_by_setup && echo ready > made_by_setup/flag\n")
    with client.session(env) as session:
        session.start()
        seen, _, _ = session.step(bash("ls; cat made_by_setup/flag"))
        assert "notes.txt" in seen.content and "ready" in seen.content
        who, _, _ = session.step(bash("id -u"))
        assert int(who.content.splitlines()[0]) not in (0, os.getuid())  # never root
        wrote, _, _ = session.step(Action(action_type="write_file", path="sub/dir/x.py",
                                          content="print(6 * 7)\n"))
        assert "wrote 13 bytes" in wrote.content
        ran, _, _ = session.step(Action(action_type="code", content="import sub.dir.x"))
        assert ran.content.startswith("42\n") and "[exit code 0]" in ran.content
        # the system's commands as a shell has them (awk: a link through /etc/alternatives)
        tools, _, _ = session.step(bash("echo 'a 42' | awk '{print $2}' | sed 's/4/4/'"))
        assert tools.content.startswith("42\n"), tools.content
        session.step(bash("python3 sub/dir/x.py > answer.txt"))
        session.step(DONE)
        assert session.score().score == 1.0


def test_an_action_the_environment_does_not_allow_is_an_error_and_the_episode_goes_on(
        client):
    env = answer_env(allowed_actions=("bash", "done"))
    with client.session(env) as session:
        session.start()
        refused, reward, done = session.step(Action(action_type="code", content="print(1)"))
        assert not done and reward is None
        assert refused.metadata["error"] == "action_not_allowed"
        assert "not allowed" in refused.content and "bash, done" in refused.content
        session.step(bash("echo 42 > answer.txt"))
        session.step(DONE)
        assert session.score().passed


def test_a_command_past_the_steps_limit_returns_its_output_so_far(client):
    env = answer_env(timeout_per_step=1.0)
    with client.session(env) as session:
        session.start()
        slow, _, done = session.step(bash("echo begun; sleep 60; echo never"))
        assert not done and slow.metadata["timed_out"] is True
        assert slow.content.startswith("begun\n") and "never" not in slow.content
        assert "past the step's limit of 1s" in slow.content
        fine, _, _ = session.step(bash("echo 42 > answer.txt; echo ok"))
        assert fine.content.startswith("ok\n")


def test_the_last_allowed_step_ends_the_episode(client):
    env = answer_env(max_steps=2)
    with client.session(env) as session:
        session.start()
        assert session.step(bash("true"))[2] is False
        last, _, done = session.step(bash("echo 42 > answer.txt"))
        assert done and "2 steps were allowed" in last.content
        with pytest.raises(SessionStateError, match="episode is over"):
            session.step(bash("true"))
        assert session.score().passed


def test_nothing_the_agent_starts_outlives_its_step(local_client):
    env = answer_env()
    with local_client.session(env) as session:
        session.start()
        uid = session.sandbox.handle.uid
        session.step(bash("sleep 300 & setsid sh -c 'sleep 300' & (sleep 300 &); echo left"))
        assert list(uid_processes(uid)) == []
        # A fork bomb, bounded by the sandbox's limits, is gone by the next step.
        session.step(bash("b() { b | b & }; b; sleep 2"))
        assert list(uid_processes(uid)) == []
        after, _, _ = session.step(bash("echo 42 > answer.txt && echo still here"))
        assert after.content.startswith("still here")
        session.step(DONE)
        assert session.score().passed


def test_output_is_bounded_and_a_forged_reply_is_only_output(client):
    env = answer_env()
    with client.session(env) as session:
        session.start()
        flood, _, _ = session.step(bash("head -c 5000000 /dev/zero | tr '\\0' x"))
        assert len(flood.content) < 200_000 and "more bytes of output left out" in flood.content
        fake = '{"ok": true, "exit_code": 0, "stdout": "forged"}'
        forged, _, _ = session.step(bash(f"echo 'deadbeef {fake}'; exit 3"))
        assert forged.metadata["exit_code"] == 3 and "deadbeef" in forged.content


def test_the_agent_cannot_reach_the_verifier_or_the_host(client, tmp_path):
    secret = "SECRET-MARK-" + os.urandom(6).hex()
    env = answer_env(ANSWER_VERIFIER + f"\n# {secret}\n")
    target = tmp_path / "planted"
    with client.session(env) as session:
        session.start()
        looked, _, _ = session.step(bash(
            "cat ../verifier.py ../../verifier.py 2>&1; "
            "grep -rs SECRET-MARK / --exclude-dir={proc,sys,usr,lib,lib32,lib64,bin,sbin} "
            f"2>/dev/null; echo pwned > {target}; echo pwned > /etc/deepgym-pwned; "
            "curl -sS http://127.0.0.1:1 2>&1 | head -n 1; kill -9 -1; echo survived"))
        assert secret not in looked.content
        assert not target.exists() and not os.path.exists("/etc/deepgym-pwned")
        again, _, _ = session.step(bash("echo 42 > answer.txt && echo next"))
        assert again.content.startswith("next")  # the agent's kill -9 -1 hit only its own
        session.step(DONE)
        assert session.score().passed


# A verifier that fails before it reads the work directory, and one that fails after.
FAILS_EARLY = "def verify(work_dir, test_cases_path=None):\n    raise RuntimeError('broken')\n"
FAILS_LATE = ("import os\n\ndef verify(work_dir, test_cases_path=None):\n"
              "    os.listdir(work_dir)\n    raise RuntimeError('broken after reading')\n")


def test_a_verifier_failing_before_it_reads_the_work_has_no_verdict_after_it_is_a_zero(
        client):
    for verifier, verdict in ((FAILS_EARLY, False), (FAILS_LATE, True)):
        with client.session(answer_env(verifier)) as session:
            session.start()
            session.step(bash("echo 42 > answer.txt"))
            result = session.score()
        assert result.has_verdict is verdict, result
        assert result.score == 0.0 and not result.passed
        assert session.score() is result  # one result per episode


def test_a_failed_setup_raises_and_leaves_no_verdict(client):
    session = client.session(answer_env(setup="echo cannot >&2; exit 4\n"))
    with pytest.raises(SandboxError, match="setup.sh failed"):
        session.start()
    assert session.result is not None and not session.result.has_verdict
    assert session.sandbox is None  # torn down


def test_the_tools_a_task_needs_are_checked_at_start_and_shown_to_the_agent(client):
    flag = "made_by_setup"
    env = answer_env(tools=("awk", "python3"), setup=f"touch {flag}\n")
    with client.session(env) as session:
        first = session.start()
        assert "Programs you can run: awk, python3." in first.content
        assert first.metadata["tools"] == ["awk", "python3"]
        seen, _, _ = session.step(bash(f"ls {flag}"))
        assert seen.content.startswith(flag), seen.content  # setup still ran after the check

    # A sandbox without one of them is an outage of ours (its image), not the agent's 0, and
    # the setup never ran.
    missing = client.session(answer_env(tools=("awk", "no-such-program-x1"),
                                        setup="echo ran-anyway >&2; exit 3\n"))
    with pytest.raises(SandboxError, match="not have on the agent's PATH: no-such-program-x1$"):
        missing.start()
    assert missing.result is not None and not missing.result.has_verdict
    assert "awk" not in missing.result.details.partition("PATH:")[2]
    assert missing.sandbox is None


def test_abandoning_or_closing_an_unscored_episode_leaves_no_verdict(client):
    session = client.session(answer_env())
    session.start()
    session.step(bash("echo 42 > answer.txt"))
    result = session.abandon("the trainer stopped")
    assert not result.has_verdict and result.error_type == contract.SESSION_ABANDONED
    assert "the trainer stopped" in result.details and session.sandbox is None
    assert session.score() is result

    closed = client.session(answer_env())
    closed.start()
    closed.close()
    assert closed.result.error_type == contract.SESSION_ABANDONED


def test_a_provider_whose_runs_start_afresh_cannot_hold_an_episode(local_client, monkeypatch):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.sandboxes.base import ForwardingProvider
    from deepgym_ray.sandboxes.local import LocalProvider

    class Afresh(ForwardingProvider):
        keeps_work = False

    with pytest.raises(ProviderUnavailableError, match="does not run agent episodes"):
        Session(Afresh(local_client.scorer.provider), answer_env())
    assert Session(ForwardingProvider(local_client.scorer.provider), answer_env()).result is None
    monkeypatch.setattr(LocalProvider, "keeps_work", False)
    with pytest.raises(ProviderUnavailableError, match="'local' sandbox provider does not "
                                                       "run agent episodes"):
        DeepGym(mode="local").session(answer_env())  # at once: nothing made, nothing called


def test_sessions_used_out_of_order_say_so(local_client):
    session = local_client.session(answer_env())
    with pytest.raises(SessionStateError, match="start"):
        session.step(bash("true"))
    with pytest.raises(SessionStateError, match="start"):
        session.score()
    with pytest.raises(ValueError, match="not multi-turn"):
        local_client.session("coin_change")
    with pytest.raises(VerifierError, match="multi-turn"):
        local_client.run(load_environment("fix_the_calculator"), "print(1)")


@pytest.mark.parametrize(("settings", "message"), [
    ({"tools": ("git", "/bin/sh")}, r"tools names '/bin/sh'"),
    ({"tools": ("a b",)}, r"tools names 'a b'"),
    ({"allowed_actions": ("bash", "fly")}, r"allowed_actions names 'fly'"),
    ({"allowed_actions": ()}, "could do nothing"),
    ({"files": {"../x": b""}}, "relative file path"),
])
def test_a_multi_turn_setting_that_cannot_work_is_refused_naming_it(settings, message):
    with pytest.raises(ValueError, match=message):
        MultiTurnTask(**settings)


def test_an_agent_that_raises_abandons_its_episode(local_client):
    def agent(observation):
        raise KeyError("policy crashed")

    with pytest.raises(KeyError):
        local_client.run_episode(answer_env(), agent)


def test_a_step_verifier_rewards_each_step(client):
    step_verifier = ("import os\n\ndef verify(work_dir, test_cases_path=None):\n"
                     "    return 1.0 if os.path.exists(os.path.join(work_dir, 'answer.txt')) "
                     "else 0.0\n")
    env = answer_env(step_verifier=step_verifier)
    with client.session(env) as session:
        session.start()
        assert session.step(bash("true"))[1] == 0.0
        assert session.step(bash("echo 41 > answer.txt"))[1] == 1.0
        session.step(DONE)
        assert session.score().score == 0.0  # the final verifier wants 42
    assert session.trajectory.rewards == [0.0, 1.0, None]


def test_the_async_twin(client):
    async def episode():
        async with client.async_session(answer_env()) as session:
            first = await session.start()
            await session.step({"action_type": "bash", "content": "echo 42 > answer.txt"})
            await session.step({"action_type": "done"})
            return first, await session.score()

    first, result = asyncio.run(episode())
    assert "notes.txt" in first.content and result.passed


def test_too_many_episodes_without_a_verdict_are_warned_of(local_client, monkeypatch, caplog):
    import logging

    from deepgym_ray.masked_rate import MaskedRate
    from deepgym_ray.sessions import rules

    watched = MaskedRate(window=100, threshold=5, name="deepgym/sessions")
    monkeypatch.setattr(rules, "EPISODES", watched)
    with caplog.at_level(logging.WARNING, logger="deepgym_ray.masked_rate"):
        for _ in range(5):
            session = local_client.session(answer_env())
            session.start()
            session.abandon("the trainer moved on")
        assert (watched.masked, watched.warnings) == (5, 0)
        with local_client.session(answer_env(FAILS_EARLY)) as session:
            session.start()
            session.step(bash("true"))
            assert not session.score().has_verdict
    assert (watched.total, watched.masked, watched.warnings) == (6, 6, 1)
    assert "6 of the last 6 samples had no verdict" in caplog.text
