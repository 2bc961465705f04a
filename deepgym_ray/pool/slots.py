"""Leases: per-caller caps on how many runs an actor runs at once, with a queue behind them.

A map call gives each actor a share of its ``max_parallel`` (the lease's slots) and may send
more work than that; what is over the share waits here, in order, and starts the moment one of
the caller's runs on this actor ends. Queued work never holds a thread. Each item that starts
gets a :class:`~deepgym_ray.sandboxes.base.CancelSignal` of its own as its last argument; when
the call is given up (:meth:`Leases.cancel`), its queued items are dropped and the signals of
its running ones are set, so they stop at once.

The runs go to the leases' own worker threads, in the order they were let start (a run freed
by another's end queues behind those of other callers that were let start before it, so no
caller starves). A worker that ends a run takes the next one without sleeping, and a submitted
batch is waited for as a whole: a run costs no future, no wake-up of the waiting thread and no
thread hand-off of its own, which matter when runs take a millisecond.

Example:
    >>> leases = Leases(4)
    >>> work = [(lambda a, b, cancel: a ** b, 2, 3), (lambda a, b, cancel: a ** b, 3, 2)]
    >>> leases.submit("call-1", 2, work).results()
    [8, 9]
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from typing import Any

from deepgym_ray.sandboxes.base import CancelSignal

__all__ = ["Batch", "Leases"]

_Work = tuple[Callable[..., Any], Any, Any]

# Cancelled prefixes remembered, so a chunk still on its way when its call was given up is
# dropped on arrival instead of started (the oldest are forgotten first).
_CANCELLED_KEPT = 1024


class Batch:
    """The items of one :meth:`Leases.submit` call; :meth:`results` waits for all of them."""

    __slots__ = ("_values", "_left", "_done", "_error")

    def __init__(self, size: int) -> None:
        self._values: list[Any] = [None] * size
        self._left = size
        self._done = threading.Event()
        self._error: BaseException | None = None
        if not size:
            self._done.set()

    def results(self, timeout: float | None = None) -> list[Any]:
        """Every item's value, in order; raises the first error an item raised, or
        CancelledError when items were dropped before they started."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self._left} items not done within {timeout}s")
        if self._error is not None:
            raise self._error
        return self._values

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _settle(self, index: int, value: Any, error: BaseException | None) -> None:
        """Called with the leases' lock held."""
        self._values[index] = value
        if error is not None and self._error is None:
            self._error = error
        self._left -= 1
        if not self._left:
            self._done.set()


class _Lease:
    __slots__ = ("slots", "running", "queue")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running: set[CancelSignal] = set()  # one signal per item running now
        self.queue: collections.deque[tuple[Batch, int, _Work]] = collections.deque()


# A run let start: (lease key, its batch, its place there, the work, its cancel signal).
_Ready = tuple[str, Batch, int, _Work, CancelSignal]


class Leases:
    """Runs work on ``workers`` threads with at most ``slots`` items per lease key at once;
    an item ``(fn, a, b)`` runs as ``fn(a, b, cancel)``."""

    def __init__(self, workers: int, name: str = "leases") -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._emptied = threading.Condition(self._lock)  # the last lease went (wait_idle)
        self._ready: collections.deque[_Ready] = collections.deque()
        self._idle = 0
        self._leases: dict[str, _Lease] = {}
        self._cancelled: collections.deque[str] = collections.deque(maxlen=_CANCELLED_KEPT)
        for i in range(max(1, workers)):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, key: str, slots: int, work: Sequence[_Work]) -> Batch:
        """Queue ``work`` items ``(fn, a, b)`` under ``key``; their values come, in order,
        from the batch returned."""
        batch = Batch(len(work))
        with self._lock:
            if self._cancelled and key.startswith(tuple(self._cancelled)):
                for index in range(len(work)):
                    batch._settle(index, None, CancelledError())
                return batch
            lease = self._leases.get(key)
            if lease is None:  # forgotten when idle: nothing of this key runs here then
                lease = self._leases[key] = _Lease(slots)
            lease.slots = max(1, slots)
            for index, item in enumerate(work):
                if len(lease.running) < lease.slots:
                    self._let_start(key, lease, batch, index, item)
                else:
                    lease.queue.append((batch, index, item))
            if self._idle:
                self._wake.notify(len(self._ready))
        return batch

    def _let_start(self, key: str, lease: _Lease, batch: Batch, index: int,
                   item: _Work) -> None:
        """With the lock held: give the item a slot and a cancel signal, and a worker."""
        cancel = CancelSignal()
        lease.running.add(cancel)
        self._ready.append((key, batch, index, item, cancel))

    def _work(self) -> None:
        lock = self._lock
        lock.acquire()
        try:
            while True:
                while not self._ready:
                    self._idle += 1
                    self._wake.wait()
                    self._idle -= 1
                key, batch, index, item, cancel = self._ready.popleft()
                lock.release()
                fn, a, b = item
                try:
                    value, error = fn(a, b, cancel), None
                except BaseException as exc:  # noqa: B036 - it is the item's result
                    value, error = None, exc
                cancel.close()
                lock.acquire()
                batch._settle(index, value, error)
                self._finished(key, cancel)
        finally:
            lock.release()

    def _finished(self, key: str, cancel: CancelSignal) -> None:
        """With the lock held: free the item's slot, for the next queued item of its lease."""
        lease = self._leases[key]
        lease.running.discard(cancel)
        if lease.queue and len(lease.running) < lease.slots:
            self._let_start(key, lease, *lease.queue.popleft())
        elif not lease.running and not lease.queue:
            del self._leases[key]
            if not self._leases:
                self._emptied.notify_all()

    def cancel(self, prefix: str) -> tuple[int, int]:
        """Give up on every lease whose key starts with ``prefix``: its queued work is dropped
        (its batches raise CancelledError), and so is work sent under such a key later; the
        signals of its running work are set, so the runs stop (a cancellable provider kills
        them at once). Returns (dropped, stopped)."""
        stopping: list[CancelSignal] = []
        dropped = 0
        with self._lock:
            self._cancelled.append(prefix)
            for key, lease in list(self._leases.items()):
                if key.startswith(prefix):
                    for batch, index, _ in lease.queue:
                        batch._settle(index, None, CancelledError())
                    dropped += len(lease.queue)
                    lease.queue.clear()
                    stopping.extend(lease.running)
                    if not lease.running:
                        del self._leases[key]
            if not self._leases:
                self._emptied.notify_all()
        for cancel in stopping:
            cancel.set()
        return dropped, len(stopping)

    def wait_idle(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until no lease has work here; True then."""
        with self._lock:
            return self._emptied.wait_for(lambda: not self._leases, timeout)

    def active(self) -> int:
        """Lease keys with work here now."""
        with self._lock:
            return len(self._leases)
