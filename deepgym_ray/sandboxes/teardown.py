"""What a provider's ``close`` must wait for: deletions on background threads, creations in flight.

A provider that throws a sandbox away during a batch (a container that failed, a Daytona sandbox
whose cleanup was not proven) deletes it on a thread of its own, so the run that discarded it
does not wait on the engine or the network. Its ``close`` must not return before those
deletions end: a process that exits right after kills the daemon threads, and the sandbox
outlives its client (issue 32: containers still running after ``close()``, a discarded Daytona
sandbox never deleted). The same for a sandbox being created while ``close`` runs: it is not in
the provider's books yet, so ``close`` waits for its creation to end (the creating run then
sees the provider closed and deletes it itself).

:class:`Teardown` counts both, waits for them (bounded), tries a failed deletion once more, and
names what is left, so ``close`` can say which sandboxes it could not delete.

Example:
    >>> teardown = Teardown()
    >>> teardown.spawn("box-1", lambda: None)        # a deletion that worked
    >>> teardown.spawn("box-2", lambda: "HTTP 500")  # one that failed twice
    >>> sorted(teardown.finish(10))
    ['box-2']
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Teardown"]

#: A deletion: returns None once the thing is gone (or was gone already), else why not.
Delete = Callable[..., "str | None"]


def _attempt(delete: Delete, args: tuple) -> str | None:
    try:
        return delete(*args)
    except Exception as exc:  # noqa: BLE001 - whatever it raised is why the thing is left
        return f"{type(exc).__name__}: {exc}"


class Teardown:
    """Deletions and creations in flight for one provider; see the module docstring."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._creating = 0
        self._deleting: dict[str, int] = {}  # name -> deletions of it in flight
        self._failed: dict[str, tuple[str, Delete, tuple]] = {}

    @contextlib.contextmanager
    def creating(self) -> Iterator[None]:
        """Around the creation of a sandbox: ``finish`` waits for it to end."""
        with self._cond:
            self._creating += 1
        try:
            yield
        finally:
            with self._cond:
                self._creating -= 1
                self._cond.notify_all()

    def spawn(self, name: str, delete: Delete, *args: Any) -> None:
        """Run ``delete(*args)`` on a daemon thread; ``finish`` waits for it."""
        with self._cond:  # counted before the thread starts: a close right now sees it
            self._deleting[name] = self._deleting.get(name, 0) + 1
        threading.Thread(target=self._delete, args=(name, delete, args), daemon=True,
                         name=f"teardown-{name}"[:60]).start()

    def _delete(self, name: str, delete: Delete, args: tuple) -> None:
        why = None
        try:
            why = _attempt(delete, args)
        finally:
            with self._cond:
                if why:
                    self._failed[name] = (why, delete, args)
                else:
                    self._failed.pop(name, None)
                self._deleting[name] -= 1
                if not self._deleting[name]:
                    del self._deleting[name]
                self._cond.notify_all()

    def finish(self, timeout: float) -> dict[str, str]:
        """Wait (at most ``timeout`` seconds) for every creation and deletion in flight, try
        each failed deletion once more, and return what is still not deleted: name -> why."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.wait_for(lambda: not self._creating and not self._deleting,
                                max(0.0, deadline - time.monotonic()))
            late = {name: f"its deletion did not end within {timeout:.0f}s"
                    for name in self._deleting}
            if self._creating:
                late[f"({self._creating} being created)"] = \
                    f"the creation did not end within {timeout:.0f}s"
            retry, self._failed = self._failed, {}
        for name, (_, delete, args) in retry.items():
            if name not in late:
                self.spawn(name, delete, *args)
        with self._cond:
            self._cond.wait_for(lambda: not (set(self._deleting) & set(retry)),
                                max(1.0, deadline - time.monotonic()))
            left = {name: why for name, (why, _, _) in self._failed.items()}
            left.update((name, f"its deletion did not end within {timeout:.0f}s")
                        for name in set(self._deleting) & set(retry))
        return {**left, **late}
