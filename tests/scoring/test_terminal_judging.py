"""Dating a Terminal-Bench run's failures (scoring.terminal_judging), on a real engine: once
the tests have run on the agent's work directory, no usable reward is the answer's judged 0;
a failure before they start has no verdict; a copy of what the answer left that runs out of
its time is the answer's 0, never the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_ray.sandboxes.docker.task_container import TaskContainer
from deepgym_ray.scoring import terminal_judging
from deepgym_ray.suites.terminal_bench import load_harbor_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "terminal_bench"


@pytest.fixture(scope="module")
def task():
    from helpers.docker_engine import TEST_IMAGE

    return load_harbor_task(FIXTURES / "count-log-errors", BASE_IMAGE=TEST_IMAGE)


def _with_tests(env, test_sh: str):
    return env.model_copy(update={"terminal_task": env.terminal_task.model_copy(
        update={"tests": {"test.sh": test_sh.encode()}})})


@pytest.mark.parametrize("test_sh", [
    "true\n",  # no reward file at all
    "mkdir -p /logs/verifier && echo many > /logs/verifier/reward.txt\n",
    "mkdir -p /logs/verifier && echo 1.5 > /logs/verifier/reward.txt\n",
    "rm -rf /logs && echo > /logs\n",  # /logs/verifier/... now names a path through a file
])
def test_no_usable_reward_after_the_tests_ran_is_the_answers_zero(docker_client, task,
                                                                   test_sh):
    result = docker_client.run_safe(_with_tests(task, test_sh), task.reference_solution)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "solution_error" and "no reward to use" in result.details


def test_a_failure_before_the_tests_start_is_no_verdict(docker_client, task, monkeypatch):
    monkeypatch.setattr(terminal_judging, "_PREPARE", "echo 'no room for /app'; exit 1")
    result = docker_client.run_safe(task, task.reference_solution)
    assert not result.has_verdict and "no room for /app" in result.details, result


def test_a_copy_of_the_answers_work_out_of_time_is_its_zero(docker_client, task, monkeypatch):
    monkeypatch.setattr(TaskContainer, "transfer_timeout", lambda box, **size: 0.001)
    result = docker_client.run_safe(task, task.reference_solution)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "policy_sandbox_failure" and "took longer" in result.details
