"""Starting the embedded Ray instance (deepgym_ray.pool.connect)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepgym_ray.pool import connect

# Ray's own words when its raylet did not register within its fixed 30 s (ray/_private/node.py).
# A command line naming a file of the installed ray package: what Ray's processes have.
RAY_FILE = str(Path(importlib.util.find_spec("ray").origin).parent / "_private" / "node.py")
GAVE_UP = Exception("The current node timed out during startup. This could happen because "
                    "some of the raylet failed to startup or the GCS has become overloaded.")


class StartingRay:
    """Stands in for the ``ray`` module's init/shutdown: ``init`` raises ``failures`` in turn
    (a raylet too slow to register cannot be made to happen on demand)."""

    def __init__(self, *failures: Exception) -> None:
        self.failures, self.calls = list(failures), []

    def init(self, **options):
        self.calls.append("init")
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self):
        self.calls.append("shutdown")


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    """The back-off between tries, recorded instead of slept."""
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        if seconds >= 1:  # a back-off; the short polls of the kill's wait really sleep
            slept.append(seconds)
        else:
            time.sleep(seconds)

    monkeypatch.setattr(connect, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    return slept


def test_a_local_start_that_ray_gave_up_on_is_tried_again(waits):
    ray = StartingRay(GAVE_UP, GAVE_UP)
    connect._start_local(ray, {"address": "local"})
    assert ray.calls == ["init", "shutdown", "init", "shutdown", "init"]
    assert waits == [connect.LOCAL_START_BACKOFF, 2 * connect.LOCAL_START_BACKOFF]


def test_the_last_give_up_and_any_other_error_are_raised():
    ray = StartingRay(*[GAVE_UP] * connect.LOCAL_START_TRIES)
    with pytest.raises(Exception, match="timed out during startup"):
        connect._start_local(ray, {"address": "local"})
    assert ray.calls == ["init", "shutdown"] * (connect.LOCAL_START_TRIES - 1) + ["init"]
    other = StartingRay(ValueError("bad option"))
    with pytest.raises(ValueError, match="bad option"):
        connect._start_local(other, {"address": "local"})
    assert other.calls == ["init"]


class LeavingProcesses(StartingRay):
    """A start that gives up after starting processes (Ray's GCS, raylet, and their own
    children), as a node that never finished starting leaves them."""

    def __init__(self, *failures: Exception) -> None:
        super().__init__(*failures)
        self.started: list[subprocess.Popen] = []
        self.grandchildren: list[int] = []
        self.others: list[subprocess.Popen] = []

    def init(self, **options):
        if self.failures:  # Ray's child, with a child of its own, both running on
            self.started.append(subprocess.Popen(
                [sys.executable, "-c", "import subprocess, sys, time\n"
                 "child = subprocess.Popen([sys.executable, '-c', 'import time; "
                 "time.sleep(600)'])\nprint(child.pid, flush=True)\ntime.sleep(600)",
                 RAY_FILE], stdout=subprocess.PIPE, text=True))
            self.grandchildren.append(int(self.started[-1].stdout.readline()))
            # and a child another thread of the process started meanwhile: not Ray's
            self.others.append(subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(600)"]))
        super().init(**options)


def test_what_a_given_up_start_left_running_is_killed_before_the_next():
    ray = LeavingProcesses(GAVE_UP)
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        connect._start_local(ray, {"address": "local"})
        assert ray.calls == ["init", "shutdown", "init"]
        (leader,), (grandchild,) = ray.started, ray.grandchildren
        assert not connect._running(leader.pid) and not connect._running(grandchild)
        assert unrelated.poll() is None  # started before the attempt: not Ray's, left alone
        assert all(other.poll() is None for other in ray.others)  # not Ray's: left alone
    finally:
        unrelated.kill()
        unrelated.wait()
        for proc in [*ray.started, *ray.others]:
            proc.kill()
            proc.wait()
