"""Leases: per-caller caps on how many runs an actor runs at once, with a queue behind them.

A map call gives each actor a share of its ``max_parallel`` (the lease's slots) and may send
more work than that; what is over the share waits here, in order, and starts the moment one of
the caller's runs on this actor ends. Queued work never holds a thread. Each item that starts
gets a :class:`~deepgym_ray.sandboxes.base.CancelSignal` of its own as its last argument; when
the call is given up (:meth:`Leases.cancel`), its queued items are dropped and the signals of
its running ones are set, so they stop at once.

Example:
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> leases = Leases(ThreadPoolExecutor(4))
    >>> work = [(lambda a, b, cancel: a ** b, 2, 3), (lambda a, b, cancel: a ** b, 3, 2)]
    >>> [f.result() for f in leases.submit("call-1", 2, work)]
    [8, 9]
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

from deepgym_ray.sandboxes.base import CancelSignal

__all__ = ["Leases"]

_Work = tuple[Callable[..., Any], Any, Any]

# Cancelled prefixes remembered, so a chunk still on its way when its call was given up is
# dropped on arrival instead of started (the oldest are forgotten first).
_CANCELLED_KEPT = 1024


class _Lease:
    __slots__ = ("slots", "running", "queue")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running: set[CancelSignal] = set()  # one signal per item running now
        self.queue: collections.deque[tuple[Future, _Work]] = collections.deque()


class Leases:
    """Runs work on ``executor`` with at most ``slots`` items per lease key at once; an item
    ``(fn, a, b)`` runs as ``fn(a, b, cancel)``."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._cancelled: collections.deque[str] = collections.deque(maxlen=_CANCELLED_KEPT)

    def submit(self, key: str, slots: int, work: Sequence[_Work]) -> list[Future]:
        """Queue ``work`` items ``(fn, a, b)`` under ``key``; one future per item, in order."""
        futures: list[Future] = [Future() for _ in work]
        start: list[tuple[Future, _Work, CancelSignal]] = []
        with self._lock:
            if self._cancelled and key.startswith(tuple(self._cancelled)):
                for future in futures:
                    future.cancel()
                return futures
            lease = self._leases.get(key)
            if lease is None:  # forgotten when idle: nothing of this key runs here then
                lease = self._leases[key] = _Lease(slots)
            lease.slots = max(1, slots)
            for future, item in zip(futures, work, strict=True):
                if len(lease.running) < lease.slots:
                    cancel = CancelSignal()
                    lease.running.add(cancel)
                    start.append((future, item, cancel))
                else:
                    lease.queue.append((future, item))
        for future, item, cancel in start:
            self._start(key, future, item, cancel)
        return futures

    def _start(self, key: str, future: Future, item: _Work, cancel: CancelSignal) -> None:
        try:
            self._executor.submit(self._run, key, future, item, cancel)
        except BaseException as exc:  # executor shut down: the run is lost, not hung
            future.set_exception(exc)
            self._finished(key, cancel)

    def _run(self, key: str, future: Future, item: _Work, cancel: CancelSignal) -> None:
        fn, a, b = item
        try:
            future.set_result(fn(a, b, cancel))
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            self._finished(key, cancel)

    def _finished(self, key: str, cancel: CancelSignal) -> None:
        cancel.close()
        with self._lock:
            lease = self._leases[key]
            lease.running.discard(cancel)
            if lease.queue and len(lease.running) < lease.slots:
                # Hand the slot straight to the next run.
                future, item = lease.queue.popleft()
                nxt: tuple[Future, _Work, CancelSignal] | None = (future, item, CancelSignal())
                lease.running.add(nxt[2])
            else:
                nxt = None
                if not lease.running and not lease.queue:
                    del self._leases[key]
        if nxt is not None:
            self._start(key, *nxt)

    def cancel(self, prefix: str) -> tuple[int, int]:
        """Give up on every lease whose key starts with ``prefix``: its queued work is dropped
        (the futures cancelled), and so is work sent under such a key later; the signals of
        its running work are set, so the runs stop (a cancellable provider kills them at once).
        Returns (dropped, stopped)."""
        dropped: list[Future] = []
        stopping: list[CancelSignal] = []
        with self._lock:
            self._cancelled.append(prefix)
            for key, lease in list(self._leases.items()):
                if key.startswith(prefix):
                    dropped.extend(future for future, _ in lease.queue)
                    lease.queue.clear()
                    stopping.extend(lease.running)
                    if not lease.running:
                        del self._leases[key]
        for future in dropped:
            future.cancel()
        for cancel in stopping:
            cancel.set()
        return len(dropped), len(stopping)

    def active(self) -> int:
        """Lease keys with work here now."""
        with self._lock:
            return len(self._leases)
