"""Leases: per-caller caps on how many runs an actor runs at once, with a queue behind them.

A map call gives each actor a share of its ``max_parallel`` (the lease's slots) and may send
more work than that; what is over the share waits here, in order, and starts the moment one of
the caller's runs on this actor ends. Queued work never holds a thread.

Example:
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> leases = Leases(ThreadPoolExecutor(4))
    >>> [f.result() for f in leases.submit("call-1", 2, [(pow, 2, 3), (pow, 3, 2)])]
    [8, 9]
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["Leases"]

_Work = tuple[Callable[..., Any], Any, Any]

# Cancelled prefixes remembered, so a chunk still on its way when its call was given up is
# dropped on arrival instead of started (the oldest are forgotten first).
_CANCELLED_KEPT = 1024


class _Lease:
    __slots__ = ("slots", "running", "queue")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running = 0
        self.queue: collections.deque[tuple[Future, _Work]] = collections.deque()


class Leases:
    """Runs work on ``executor`` with at most ``slots`` items per lease key at once."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._cancelled: collections.deque[str] = collections.deque(maxlen=_CANCELLED_KEPT)

    def submit(self, key: str, slots: int, work: Sequence[_Work]) -> list[Future]:
        """Queue ``work`` items ``(fn, a, b)`` under ``key``; one future per item, in order."""
        futures: list[Future] = [Future() for _ in work]
        start: list[tuple[Future, _Work]] = []
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
                if lease.running < lease.slots:
                    lease.running += 1
                    start.append((future, item))
                else:
                    lease.queue.append((future, item))
        for future, item in start:
            self._start(key, future, item)
        return futures

    def _start(self, key: str, future: Future, item: _Work) -> None:
        try:
            self._executor.submit(self._run, key, future, item)
        except BaseException as exc:  # executor shut down: the run is lost, not hung
            future.set_exception(exc)
            self._finished(key)

    def _run(self, key: str, future: Future, item: _Work) -> None:
        fn, a, b = item
        try:
            future.set_result(fn(a, b))
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            self._finished(key)

    def _finished(self, key: str) -> None:
        with self._lock:
            lease = self._leases[key]
            if lease.queue and lease.running <= lease.slots:
                nxt = lease.queue.popleft()  # hand the slot straight to the next run
            else:
                nxt = None
                lease.running -= 1
                if lease.running == 0 and not lease.queue:
                    del self._leases[key]
        if nxt is not None:
            self._start(key, *nxt)

    def cancel(self, prefix: str) -> int:
        """Drop the queued work of every lease whose key starts with ``prefix``; its futures
        are cancelled, and so is work sent under such a key later. Work already running is left
        to finish. Returns how many were dropped."""
        dropped: list[Future] = []
        with self._lock:
            self._cancelled.append(prefix)
            for key, lease in list(self._leases.items()):
                if key.startswith(prefix):
                    dropped.extend(future for future, _ in lease.queue)
                    lease.queue.clear()
                    if lease.running == 0:
                        del self._leases[key]
        for future in dropped:
            future.cancel()
        return len(dropped)

    def active(self) -> int:
        """Lease keys with work here now."""
        with self._lock:
            return len(self._leases)
