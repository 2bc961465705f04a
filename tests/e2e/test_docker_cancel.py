"""A given-up run in a warm container: the agent kills it as at its deadline, cleans up and
proves the container clean as after any run, and the same container serves the next run."""

from __future__ import annotations

import threading

import pytest
from helpers.cancel import QUICK, SLEEPER, SLEEPING_SOLUTION, wait_until
from helpers.docker_engine import TEST_IMAGE, docker_skip_reason

from deepgym_ray.exceptions import RunCancelledError
from deepgym_ray.judge.deepgym_proc import uid_processes
from deepgym_ray.sandboxes.base import CancelSignal
from deepgym_ray.sandboxes.docker import DockerProvider
from deepgym_ray.scoring.judging import judge

pytestmark = pytest.mark.e2e


class _Watched(DockerProvider):
    """Remembers each run's container (its solution uid shows on the host's /proc too)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.boxes: list = []

    def create(self, env):
        sandbox = super().create(env)
        self.boxes.append(sandbox.handle.container)
        return sandbox


@pytest.fixture
def provider():
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    made = _Watched(image=TEST_IMAGE, warm_containers=1)
    yield made
    made.close()


def test_a_cancelled_run_is_killed_and_its_container_stays_warm_and_clean(provider):
    cancel = CancelSignal()

    def cancel_when_the_solution_runs() -> None:
        wait_until(lambda: provider.boxes and uid_processes(provider.boxes[0].uids[1]),
                   "the solution running in its container")
        cancel.set()

    watcher = threading.Thread(target=cancel_when_the_solution_runs, daemon=True)
    watcher.start()
    try:
        with pytest.raises(RunCancelledError):
            judge(provider, SLEEPER, SLEEPING_SOLUTION, cancel)
    finally:
        cancel.close()
    watcher.join(10)
    box = provider.boxes[0]
    assert cancel.is_set() and box.healthy  # the agent proved it clean: kept warm
    assert uid_processes(box.uids[1]) == [] and uid_processes(box.uids[0]) == []
    again = judge(provider, QUICK, "x = 1")
    assert again.passed and provider.boxes[1] is box  # the same container, reused
