"""Agent episodes on the Ray pool: each held by one actor from start to end, spread over the
actors, reaped when idle, abandoned at once; every episode has one result. (An actor killed
mid-episode: tests/faults/test_session_faults.py.)"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest
from helpers.episodes import answer_env

from deepgym_ray import contract
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.pool import get_pool
from deepgym_ray.pool.pooled_session import PooledSession, pick_actor
from deepgym_ray.sessions import Action
from deepgym_ray.suites import load_environment

ENV = answer_env(timeout_per_step=120, files={"notes.txt": b"write 42\n"})


def bash(command: str) -> Action:
    return Action(action_type="bash", content=command)


@pytest.fixture(scope="module")
def client(ray_local):
    config = PoolConfig(name=f"sessions-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=2,
                        num_cpus_per_actor=0, max_retries=0)
    made = DeepGym(config=DeepGymConfig(mode="local", backend="ray", pool=config))
    yield made
    get_pool(made).shutdown()
    made.close()


def open_sessions(client) -> list[int]:
    return [stats["open_sessions"] for stats in get_pool(client).stats()]


@pytest.mark.slow  # a pool of Ray actors
def test_an_episode_on_the_pool_scores_as_in_process(client):
    env = load_environment("fix_the_calculator")
    session = client.session(env)
    assert isinstance(session, PooledSession)
    session.start()
    for action in json.loads(env.reference_solution):
        session.step(action)
    result = session.score()
    assert result.passed and result.score == 1.0, result.details
    lazy = client.run_episode(env, lambda observation: {"action_type": "done"})
    assert lazy.has_verdict and not lazy.passed
    assert open_sessions(client) == [0, 0]


@pytest.mark.slow  # a pool of Ray actors
def test_sessions_spread_over_the_actors_and_each_step_reaches_its_own_sandbox(client):
    sessions = [client.session(ENV) for _ in range(4)]
    for session in sessions:
        session.start()
    assert sorted(s.index for s in sessions) == [0, 0, 1, 1]
    assert open_sessions(client) == [2, 2]
    for number, session in enumerate(sessions):
        session.step(bash(f"echo {number} > mine.txt"))
    for number, session in enumerate(sessions):
        seen, _, _ = session.step(bash("cat mine.txt; echo 42 > answer.txt"))
        assert seen.content.startswith(f"{number}\n")
    assert all(session.score().passed for session in sessions)
    assert open_sessions(client) == [0, 0]


@pytest.mark.slow  # a pool of Ray actors
def test_an_idle_session_is_reaped_without_a_verdict(client):
    pool = get_pool(client)
    session = pool.session(ENV, idle_timeout=0.5)
    session.start()
    deadline = time.monotonic() + 120  # a bound on the wait, not a speed asserted
    while open_sessions(client)[session.index] and time.monotonic() < deadline:
        time.sleep(0.2)
    observation, reward, done = session.step(bash("echo 42 > answer.txt"))
    assert done and reward is None
    assert observation.metadata["error"] == contract.SESSION_IDLE
    result = session.score()
    assert not result.has_verdict and result.error_type == contract.SESSION_IDLE


def sleeping(marker: str) -> bool:
    """Whether a process runs ``sleep <marker>`` on this machine."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                    return True
        except OSError:
            pass
    return False


@pytest.mark.slow  # a pool of Ray actors
def test_abandoning_stops_a_running_step_at_once(client):
    session = client.session(ENV)
    session.start()
    marker = f"{600 + uuid.uuid4().int % 1000}.5"
    ended = threading.Event()

    seen = []

    def slow_step():
        seen.append(session.step(bash(f"sleep {marker}")))
        ended.set()

    threading.Thread(target=slow_step, daemon=True).start()
    deadline = time.monotonic() + 120  # a bound on the wait, not a speed asserted
    while not sleeping(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeping(marker)
    result = session.abandon("the trainer gave up")
    assert not result.has_verdict and result.error_type == contract.SESSION_ABANDONED
    assert ended.wait(120), "the step went on after its session was abandoned"
    observation, reward, done = seen[0]
    assert done and observation.metadata["error"] == contract.SESSION_ABANDONED  # not timed out
    assert not sleeping(marker)
    assert open_sessions(client)[session.index] == 0


def test_new_sessions_go_to_the_ready_actor_with_the_fewest():
    assert pick_actor({0: 3, 1: 1, 2: 1}, {0, 1, 2}, 3) == 1
    assert pick_actor({0: 0, 1: 0}, {1}, 2) == 1  # actor 0 has not answered yet
    assert pick_actor({}, set(), 2) == 0
