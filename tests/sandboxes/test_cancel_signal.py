"""CancelSignal, and a given-up run on the real local provider: killed at once, cleaned up and
checked as after its deadline, and never a verdict."""

from __future__ import annotations

import os
import threading
import time

import pytest
from helpers.cancel import SLEEPER, SLEEPING_SOLUTION
from helpers.local_sandbox import RecordingProvider, leftovers

from deepgym_ray import contract
from deepgym_ray.exceptions import RunCancelledError
from deepgym_ray.judge.deepgym_proc import kill_uid, uid_processes
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import CancelSignal, ForwardingProvider
from deepgym_ray.scoring import Scorer
from deepgym_ray.scoring.judging import judge


def test_the_signal_wakes_every_way_of_watching_it_once():
    import select

    cancel, called = CancelSignal(), []
    cancel.on_set(lambda: called.append("early"))
    fd = cancel.fileno()
    assert select.select([fd], [], [], 0)[0] == [] and not cancel.is_set()
    cancel.set()
    cancel.set()
    cancel.on_set(lambda: called.append("late"))  # already set: called at once
    assert cancel.is_set() and select.select([fd], [], [], 0)[0] == [fd]
    assert called == ["early", "late"]
    cancel.close()
    cancel.set()  # after close: the flag only
    with pytest.raises(ValueError):
        cancel.fileno()


def _cancel_when_the_solution_runs(provider: RecordingProvider, cancel: CancelSignal) -> None:
    """Sets ``cancel`` once the run's solution process is up (an event, polled)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        uids = [run["uid"] for run in provider.runs]
        if uids and uids[0] is not None and uid_processes(uids[0]):
            break
        time.sleep(0.01)
    cancel.set()


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "exec"])
def test_a_cancelled_local_run_is_killed_cleaned_up_and_no_verdict(fork_server):
    if os.geteuid() != 0:
        pytest.skip("the run's solution uid, which this test watches, needs root")
    provider = RecordingProvider(fork_server=fork_server)
    cancel = CancelSignal()
    try:
        watcher = threading.Thread(target=_cancel_when_the_solution_runs,
                                   args=(provider, cancel), daemon=True)
        watcher.start()
        with pytest.raises(RunCancelledError, match="gave up on it while it ran"):
            judge(provider, SLEEPER, SLEEPING_SOLUTION, cancel)
        watcher.join(10)
        assert cancel.is_set()
        assert uid_processes(provider.runs[0]["uid"]) == []  # the solution went with it
        assert leftovers(provider) == []  # directories and cgroups too
        # The provider is as good as before: the next run scores.
        right = judge(provider, Environment(name="ok", verifier_code="return 1.0"), "x = 1")
        assert right.passed
    finally:
        cancel.close()
        provider.close()


def test_a_run_cancelled_before_it_starts_never_makes_a_sandbox():
    provider = RecordingProvider()
    cancel = CancelSignal()
    cancel.set()
    try:
        result = Scorer(provider=provider).run_safe(SLEEPER, SLEEPING_SOLUTION, cancel)
    finally:
        provider.close()
    assert provider.runs == []
    assert result.error_type == contract.CANCELLED and not result.has_verdict
    assert result.reward is None


def test_a_wrapper_that_overrides_run_is_not_handed_cancel_unless_it_says_so():
    class Plain(ForwardingProvider):
        def run(self, sandbox, command, *, timeout, stdin=None, env=None):
            return self.inner.run(sandbox, command, timeout=timeout, stdin=stdin, env=env)

    class Passing(Plain):
        cancellable = True

    inner = RecordingProvider()
    try:
        assert ForwardingProvider(inner).cancellable is True
        assert Plain(inner).cancellable is False  # its run() has no cancel= to take
        assert Passing(inner).cancellable is True
        cancel = CancelSignal()
        assert judge(Plain(inner), Environment(name="ok", verifier_code="return 1.0"),
                     "x = 1", cancel).passed
    finally:
        inner.close()


@pytest.mark.slow
@pytest.mark.parametrize("cloud", ["daytona", "modal"])
def test_a_cancelled_remote_run_stops_waiting_and_its_sandbox_is_deleted(cloud, request):
    """Given up while its solution runs, a remote run stops waiting at once (Daytona's on a
    daemon thread of ours; Modal's on the SDK's own future, on the run's thread, which is
    cancelled), and its sandbox is deleted."""
    from helpers.cancel import QUICK, wait_until

    from deepgym_ray.sandboxes import provider_class

    if os.geteuid() != 0:
        pytest.skip("the run's solution uid, which this test watches, needs root")
    server = request.getfixturevalue(f"{cloud}_server")

    class Watched(provider_class(cloud)):
        def create(self, env):
            sandbox = super().create(env)
            self.made.append(sandbox)
            return sandbox

        def bounded(self, fn, *args, **kwargs):  # the calls that go by a daemon thread
            self.on_daemon_threads.append(kwargs["what"])
            return super().bounded(fn, *args, **kwargs)

    provider = Watched(**server.provider_options(), call_timeout=5.0)
    provider.made, provider.on_daemon_threads = [], []
    cancel = CancelSignal()

    def cancel_when_the_solution_runs() -> None:
        wait_until(lambda: provider.made and uid_processes(provider.made[0].handle.uid),
                   f"the solution running in the {cloud} sandbox")
        cancel.set()

    threading.Thread(target=cancel_when_the_solution_runs, daemon=True).start()
    try:
        started = time.monotonic()
        with pytest.raises(RunCancelledError) as caught:
            judge(provider, SLEEPER, SLEEPING_SOLUTION, cancel)
        # The provider stopped waiting (the run itself would take ten minutes).
        assert time.monotonic() - started < SLEEPER.timeout
        assert "run the judge: given up" in str(caught.value.__cause__)
        assert "create a sandbox" in provider.on_daemon_threads
        assert ("upload and run the judge" in provider.on_daemon_threads) is (cloud != "modal")
        sandbox = provider.made[0]
        remote_id = sandbox.id.split("/")[0]
        # Deleted, as after a call that timed out: that ends everything in a real cloud's
        # sandbox. (The test servers kill only the command's process group then, not the
        # solution's own session: the test kills that below.)
        wait_until(lambda: remote_id not in server.live_sandboxes(), "the sandbox deleted")
        assert remote_id not in provider.live_sandboxes()
        assert judge(provider, QUICK, "x = 1").passed  # a fresh sandbox serves the next run
    finally:
        cancel.close()
        provider.close()
        for sandbox in provider.made:
            kill_uid(sandbox.handle.uid, rounds=20, wait_for_zombies=False)
