"""Agent episodes on the remote providers, each through its real SDK against its local test
server: Daytona's, whose sandboxes' user is ``daytona`` with passwordless sudo (Daytona's
default image), E2B's and Modal's. The agent's work lasts from one step to the next (the session's
work area, kept by the in-sandbox program), nothing it starts outlives its step, it cannot
reach the verifier's files, and the sandbox of an episode is deleted when the episode ends,
never reused."""

from __future__ import annotations

import pytest
from helpers.episodes import RIGHT, answer_env
from helpers.remote_setup import options

from deepgym_ray.client import DeepGym
from deepgym_ray.envs import multi_turn_names
from deepgym_ray.sessions import Action
from deepgym_ray.suites import load_environment

pytestmark = pytest.mark.slow
SERVERS = {"daytona": "daytona_server", "e2b": "e2b_server", "modal": "modal_server"}


def bash(command: str) -> Action:
    return Action(action_type="bash", content=command)


@pytest.fixture(scope="module", params=sorted(SERVERS))
def client(request):
    pytest.importorskip(request.param)
    server = request.getfixturevalue(SERVERS[request.param])
    made = DeepGym(mode=request.param, backend="threads", **options(server))
    yield made
    made.close()


def test_the_built_in_episodes_score_full_marks_and_a_lazy_agent_a_judged_zero(client):
    import json

    for name in multi_turn_names():
        env = load_environment(name)
        actions = json.loads(env.reference_solution)
        with client.session(env) as session:
            session.start()
            for action in actions:
                _, _, done = session.step(action)
                if done:
                    break
            result = session.score()
        assert (result.score, result.passed, result.has_verdict) == (1.0, True, True), result
        lazy = client.run_episode(env, lambda observation: Action(action_type="done"))
        assert lazy.has_verdict and lazy.score < 1.0 and not lazy.passed, lazy


def test_the_work_lasts_from_step_to_step_and_nothing_outlives_a_step(client):
    provider = client.provider
    env = answer_env(setup="echo ready > flag\n")
    with client.session(env) as session:
        session.start()
        [box] = provider.live_sandboxes()
        seen, _, _ = session.step(bash("cat flag; id -u; echo kept > kept.txt; "
                                       "(sleep 300 &) ; echo started"))
        lines = seen.content.splitlines()
        assert lines[0] == "ready" and int(lines[1]) != 0 and "started" in seen.content, lines
        later, _, _ = session.step(bash("cat kept.txt; pgrep -x sleep || echo none"))
        assert later.content.startswith("kept\nnone\n"), later.content
        tools, _, _ = session.step(bash("echo 'a 42' | awk '{print $2}'"))
        assert tools.content.startswith("42\n"), tools.content
        session.step(RIGHT)
        assert session.score().passed
    assert box not in provider.live_sandboxes()  # deleted, not kept for another run


def test_the_agent_cannot_read_the_verifier_or_leave_its_work_area(client):
    env = answer_env()
    with client.session(env) as session:
        session.start()
        # The run's files (the verifier's among them) are in the run's directory, beside
        # the work area's: the agent can name it from its own path, and not enter it.
        peek, _, _ = session.step(bash(
            'area=$(dirname "$PWD"); run=${area%-s}; ls -d "$run"; cat "$run/verifier.py"; '
            'touch "$run/pwned"; echo x > "$(dirname "$run")/pwned"; echo end'))
        assert "def verify" not in peek.content and "end" in peek.content, peek.content
        assert peek.content.count("Permission denied") == 3, peek.content
        session.step(RIGHT)
        assert session.score().passed
