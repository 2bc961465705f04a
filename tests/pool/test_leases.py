"""Leases: a caller's cap on runs at once per actor, with the rest queued in order."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import pytest

from deepgym_ray.pool.slots import Leases


class _Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.order: list[int] = []

    def run(self, i: int, delay: float, _cancel=None) -> int:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.order.append(i)
        time.sleep(delay)
        with self.lock:
            self.now -= 1
        return i


def _in_queue_order(order: list[int], slots: int) -> bool:
    """Each run started within ``slots`` places of its turn: work is released in queue order,
    though two runs released at the same moment may take their threads in either order."""
    return sorted(order) == list(range(len(order))) and all(
        abs(position - item) < slots for position, item in enumerate(order))


def test_a_lease_never_runs_more_than_its_slots_and_keeps_order():
    counter, leases = _Counter(), Leases(16)
    first = leases.submit("call", 3, [(counter.run, i, 0.02) for i in range(10)])
    second = leases.submit("call", 3, [(counter.run, i, 0.02) for i in range(10, 16)])
    assert first.results() + second.results() == list(range(16))
    assert counter.peak == 3  # 16 threads were free: the lease held the runs back
    assert _in_queue_order(counter.order, 3)  # queued work starts in the order it came
    assert leases.active() == 0  # an idle lease is forgotten


def test_leases_of_different_keys_are_independent():
    counters, leases = {"a": _Counter(), "b": _Counter()}, Leases(16)
    batches = [leases.submit(key, 2, [(counters[key].run, i, 0.02) for i in range(6)])
               for key in ("a", "b")]
    assert [value for batch in batches for value in batch.results()] == list(range(6)) * 2
    assert counters["a"].peak <= 2 and counters["b"].peak <= 2
    assert _in_queue_order(counters["a"].order, 2) and _in_queue_order(counters["b"].order, 2)


def test_an_error_frees_the_slot_and_reaches_its_future_only():
    def boom(_a, _b, _cancel):
        raise ValueError("bad run")

    leases = Leases(4)
    batch = leases.submit("k", 1, [(boom, 0, 0), (lambda a, b, _: a + b, 2, 3)])
    with pytest.raises(ValueError, match="bad run"):
        batch.results()
    assert batch._values[1] == 5  # the other item ran
    assert leases.active() == 0


def test_work_arriving_after_its_call_was_cancelled_never_starts():
    started = []
    leases = Leases(4)
    assert leases.cancel("call-7-") == (0, 0)  # given up before its chunk got here
    late = leases.submit("call-7-actor-0", 2, [(lambda a, b, _: started.append(a), 1, 0)] * 3)
    other = leases.submit("call-8-actor-0", 2, [(lambda a, b, _: a + b, 2, 3)])
    with pytest.raises(CancelledError):
        late.results()
    assert started == []
    assert other.results() == [5] and leases.active() == 0


def test_cancel_sets_the_signal_of_each_running_item_and_drops_the_queued():
    started = threading.Barrier(3)  # two runs and this test

    def wait_for_cancel(i, _b, cancel):
        started.wait(timeout=30)
        return i, cancel.fileno() is not None and _woken(cancel)

    leases = Leases(4)
    running = leases.submit("call-9-actor-0", 2, [(wait_for_cancel, i, 0) for i in range(2)])
    queued = leases.submit("call-9-actor-0", 2, [(wait_for_cancel, i, 0) for i in range(2, 5)])
    started.wait(timeout=30)  # both slots are running, three items queued
    assert leases.cancel("call-9-") == (3, 2)
    assert running.results(timeout=30) == [(0, True), (1, True)]
    with pytest.raises(CancelledError):
        queued.results(timeout=30)
    assert leases.active() == 0


def _woken(cancel) -> bool:
    """Blocks until the signal's descriptor is readable (it is, once cancel() set it)."""
    import select

    ready, _, _ = select.select([cancel.fileno()], [], [], 30)
    return bool(ready) and cancel.is_set()


def test_a_run_freed_by_anothers_end_waits_behind_other_callers_runs():
    """One worker, two callers: when a's first run ends, b's run (let start before) goes
    first, then a's next one. No caller keeps the worker to itself."""
    order = []
    gate = threading.Event()

    def run(name, _b, _cancel):
        if name == "a0":
            gate.wait(30)  # hold the only worker until both callers have submitted
        order.append(name)
        return name

    leases = Leases(1)
    a = leases.submit("a", 1, [(run, "a0", 0), (run, "a1", 0)])
    b = leases.submit("b", 1, [(run, "b0", 0)])
    gate.set()
    assert a.results(timeout=30) == ["a0", "a1"] and b.results(timeout=30) == ["b0"]
    assert order == ["a0", "b0", "a1"]
