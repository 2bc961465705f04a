"""CancelSignal: set, from another thread, when the caller of one run has given up on it.

The pool's actor makes one for each run it starts for a map call (:mod:`deepgym_ray.pool.slots`)
and sets it when that call is given up (Ctrl-C, a closed generator, a trainer that stops). The
judge hands it to the provider's ``run``, which watches it beside the run's own process and,
once it is set, kills the run's processes the way it does at the deadline. ``fileno`` is a
descriptor that turns readable when the signal is set (for ``select`` beside a pidfd or a
socket); ``on_set`` calls a function then. The descriptor (one eventfd) is made only when a
provider asks for it: a signal costs a lock and a flag, about 1 us, and 5 us with it.

Example:
    >>> import select
    >>> cancel = CancelSignal()
    >>> select.select([cancel.fileno()], [], [], 0)[0]
    []
    >>> cancel.set()
    >>> cancel.is_set(), len(select.select([cancel.fileno()], [], [], 0)[0])
    (True, 1)
    >>> cancel.close()
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

__all__ = ["CancelSignal"]

# What wakes a watcher: an eventfd takes exactly one 8-byte count (a pipe takes it too).
_WAKE = (1).to_bytes(8, sys.byteorder)


class CancelSignal:
    """A one-way flag for one run: ``set`` once, watched by ``is_set``, ``fileno``, ``on_set``.

    Thread-safe. ``close`` (by the run's owner, once the run is over) releases the descriptor;
    setting it afterwards only sets the flag.
    """

    __slots__ = ("_lock", "_set", "_pipe", "_callbacks", "_closed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._pipe: tuple[int, int] | None = None  # (read, write), made by the first fileno()
        self._callbacks: list[Callable[[], object]] | None = None
        self._closed = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Give up on the run: wake whatever watches it. Later calls do nothing."""
        with self._lock:
            if self._set:
                return
            self._set = True
            if self._pipe is not None:
                os.write(self._pipe[1], _WAKE)
            callbacks, self._callbacks = self._callbacks or [], None
        for callback in callbacks:
            callback()

    def fileno(self) -> int:
        """A descriptor that is readable once the signal is set (it stays readable)."""
        with self._lock:
            if self._closed:
                raise ValueError("the cancel signal is closed")
            if self._pipe is None:
                self._pipe = _new_pipe()
                if self._set:
                    os.write(self._pipe[1], _WAKE)
            return self._pipe[0]

    def on_set(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (from the thread that sets the signal) once it is set; at once
        when it is set already."""
        with self._lock:
            if not self._set:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback()

    def close(self) -> None:
        """Release the descriptor and the callbacks: the run is over."""
        with self._lock:
            self._closed = True
            pipe, self._pipe, self._callbacks = self._pipe, None, None
        if pipe is not None:
            for fd in set(pipe):
                os.close(fd)


def _new_pipe() -> tuple[int, int]:
    """(read end, write end): one eventfd where there is one (half the cost of a pipe)."""
    if hasattr(os, "eventfd"):
        fd = os.eventfd(0, os.EFD_CLOEXEC)
        return fd, fd
    return os.pipe()
