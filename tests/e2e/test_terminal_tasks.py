"""Terminal-Bench tasks in Harbor's format on a real Docker engine: the answer's script runs in
the task's container, the tests in a fresh one holding only the work directory
(tests/fixtures/terminal_bench)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_ray.suites.terminal_bench import load_terminal_bench

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "terminal_bench"


@pytest.fixture(scope="module")
def tasks(docker_client):
    from helpers.docker_engine import TEST_IMAGE

    envs = load_terminal_bench(FIXTURES, suite="terminal_bench_2", BASE_IMAGE=TEST_IMAGE)
    return docker_client, {env.name.split("/", 1)[1]: env for env in envs}


def test_every_reference_solution_scores_one(tasks):
    client, envs = tasks
    assert set(envs) == {"count-log-errors", "build-user-totals", "write-word-frequency"}
    for env in envs.values():
        result = client.run(env, f"```bash\n{env.terminal_task.solution}```")
        assert (result.score, result.passed, result.error_type) == (1.0, True, None), result


@pytest.mark.parametrize("script", ["", "echo 6 > /app/answer.txt.tmp\n", "exit 1\n"])
def test_scripts_that_do_not_do_the_task_score_zero(tasks, script):
    client, envs = tasks
    result = client.run(envs["count-log-errors"], script)
    assert result.has_verdict and (result.score, result.error_type) == (0.0, None), result


ATTACKS = {
    # The reward file written in the agent phase never reaches grading.
    "writes the reward file": "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"
                              'echo \'{"reward": 1.0}\' > /logs/verifier/reward.json\n',
    # The tests are not in the agent's container to read or change.
    "reads the hidden tests": "cat /tests/test_outputs.py > /app/answer.txt 2>&1\n"
                              "ls -la / >> /app/answer.txt\n",
    # A symlink out of the work directory is dropped on the way to grading.
    "links out of the work directory": "ln -s /logs/verifier/reward.txt /app/answer.txt\n"
                                       "ln -s /tests /app/tests_link\n",
    # No network in the agent's container.
    "reaches the network": "python3 -c 'import socket; socket.create_connection("
                           "(\"1.1.1.1\", 53), 3)' && echo 6 > /app/answer.txt\n",
    # A process left running does not survive into grading.
    "leaves a process behind": "(setsid sh -c 'while true; do echo 1 > /logs/verifier/"
                               "reward.txt 2>/dev/null; sleep 0.1; done' &) \n"
                               "mkdir -p /logs/verifier\n",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attacks_on_the_two_phases_score_zero(tasks, attack):
    client, envs = tasks
    result = client.run(envs["count-log-errors"], ATTACKS[attack])
    assert result.has_verdict and result.score == 0.0, result


def test_a_script_that_runs_past_its_limit_is_its_timeout(tasks):
    client, envs = tasks
    env = envs["count-log-errors"]
    short = env.model_copy(update={"terminal_task": env.terminal_task.model_copy(
        update={"agent_timeout": 5.0})})
    result = client.run(short, "sleep 600\n")
    assert (result.score, result.error_type) == (0.0, "solution_timeout"), result


def test_tests_that_ran_on_the_work_and_wrote_no_reward_are_its_judged_zero(tasks):
    # The dating rule: the tests ran the agent's work, so a reward missing after them is the
    # answer's 0 (a program of the answer's could have removed it); a test.sh that never writes
    # one makes every answer 0, the reference too, which `qa` and `eval --reference` show.
    client, envs = tasks
    env = envs["count-log-errors"]
    silent = env.model_copy(update={"terminal_task": env.terminal_task.model_copy(
        update={"tests": {"test.sh": b"#!/bin/bash\ntrue\n"}})})
    result = client.run_safe(silent, env.terminal_task.solution)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "solution_error" and "no reward file" in result.details


def test_a_given_up_run_is_stopped_at_once(tasks):
    import os
    import threading
    import time

    from deepgym_ray.exceptions import RunCancelledError
    from deepgym_ray.sandboxes.cancel import CancelSignal
    from deepgym_ray.scoring.judging import judge

    client, envs = tasks
    cancel = CancelSignal()
    mark = b"sleep\x00617\x00"

    def give_up_once_it_runs():  # the event: the script's sleep is up (host /proc sees it)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        if handle.read() == mark:
                            cancel.set()
                            return
                except OSError:
                    continue
            time.sleep(0.05)

    threading.Thread(target=give_up_once_it_runs, daemon=True).start()
    with pytest.raises(RunCancelledError):  # not the 60 s agent limit's solution_timeout
        judge(client.provider, envs["count-log-errors"], "sleep 617\n", cancel)
