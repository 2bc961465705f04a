"""Calls into a sandbox cloud's SDK, each bounded by our own deadline, each failure typed.

SDK timeouts (Daytona's use SIGALRM on the main thread and an asynchronous exception
elsewhere) cannot be trusted to interrupt a blocking socket call in a Ray actor's thread; so
every call here runs on a daemon thread of its own and the caller stops waiting at the
deadline (the SDK's socket timeout, set a little later, ends the abandoned thread). An SDK
whose calls are futures of its own event loop (Modal's) is bounded on the caller's thread
instead (:func:`bounded_here`, :func:`wait`). The
provider's ``translate`` turns a failure into a :class:`~deepgym_ray.exceptions.SandboxError`
subclass that says what went wrong: the connection, a timeout, an HTTP status, or a sandbox
that is gone.

Example:
    >>> bounded(lambda: 2 + 2, deadline=5, what="add", translate=lambda e, w, s: e)
    4
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from deepgym_ray.exceptions import ProviderTimeoutError, RunCancelledError, SandboxError
from deepgym_ray.sandboxes.base import CancelSignal

T = TypeVar("T")
#: ``translate(exc, what, sandbox_id)``: the SandboxError for a failed call.
Translate = Callable[[BaseException, str, "str | None"], SandboxError]


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, outermost first (cycles cut)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def retry_after(headers: Any) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number, or an HTTP date), if any."""
    if not headers:
        return None
    value = next((v for k, v in dict(headers).items() if str(k).lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        return max(0.0, parsedate_to_datetime(str(value)).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class _DaemonWorkers:
    """Daemon threads for SDK calls, kept for reuse (a thread start is costly on a busy
    machine); a new one starts whenever none is idle, so a hung call never blocks another."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future:
        future: Future = Future()
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._queue.put((fn, future))
        if spawn:
            threading.Thread(target=self._work, daemon=True, name="sandbox-call").start()
        return future

    def _work(self) -> None:
        while True:
            try:
                fn, future = self._queue.get()
                try:
                    future.set_result(fn())
                except BaseException as exc:  # noqa: B036 - the SDK's timeout marker too
                    future.set_exception(exc)
            except BaseException:  # noqa: B036, S112 - a stray async exception: keep serving
                pass
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()


def bounded(fn: Callable[..., T], *args: Any, deadline: float, what: str,
            translate: Translate, service: str = "the provider",
            sandbox_id: str | None = None, cancel: CancelSignal | None = None,
            **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a daemon thread, given up after ``deadline`` seconds, or as
    soon as ``cancel`` is set.

    Raises ProviderTimeoutError at the deadline (naming ``service``), RunCancelledError once
    cancelled, and ``translate``'s error when the call fails.
    """
    future = _WORKERS.submit(lambda: fn(*args, **kwargs))
    bound = _Bound(time.monotonic() + deadline, deadline, what, service, sandbox_id, cancel)
    try:
        return bound.wait(future)
    except (ProviderTimeoutError, RunCancelledError):
        raise
    except BaseException as exc:  # noqa: B036 - whatever the call raised, typed
        raise translate(exc, what, sandbox_id) from exc


def bounded_here(fn: Callable[..., T], *args: Any, deadline: float, what: str,
                 translate: Translate, service: str = "the provider",
                 sandbox_id: str | None = None, cancel: CancelSignal | None = None,
                 **kwargs: Any) -> T:
    """:func:`bounded`, on this thread, for an SDK whose every call is a wait on a future of
    its own event loop (Modal's): ``fn`` waits on each through :func:`wait`, which gives it up
    at the deadline or once ``cancel`` is set (and cancels it). No daemon thread: a thread
    switch each way less per call (0.3 to 0.6 ms of a Modal run's client CPU, measured)."""
    _HERE.bound = _Bound(time.monotonic() + deadline, deadline, what, service, sandbox_id,
                         cancel)
    try:
        return fn(*args, **kwargs)
    except (ProviderTimeoutError, RunCancelledError):
        raise
    except BaseException as exc:  # noqa: B036 - whatever the call raised, typed
        raise translate(exc, what, sandbox_id) from exc
    finally:
        _HERE.bound = None


def wait(future: Future) -> Any:
    """The result of ``future``, an SDK call running on the SDK's event loop, within the bound
    :func:`bounded_here` set on this thread (without one: as long as it takes)."""
    bound: _Bound | None = getattr(_HERE, "bound", None)
    return future.result() if bound is None else bound.wait(future, cancellable=True)


_HERE = threading.local()


class _Bound:
    """Where a bounded call's waiting ends: its deadline (monotonic), its caller's cancel."""

    def __init__(self, ends: float, deadline: float, what: str, service: str,
                 sandbox_id: str | None, cancel: CancelSignal | None) -> None:
        self.ends, self.deadline, self.what = ends, deadline, what
        self.service, self.sandbox_id, self.cancel = service, sandbox_id, cancel

    def wait(self, future: Future, *, cancellable: bool = False) -> Any:
        """``future``'s result; ProviderTimeoutError at the deadline, RunCancelledError once
        cancelled (the future cancelled then, where it still can be). ``cancellable``: the
        future is an SDK call on its event loop, which cancelling it ends: the caller's
        cancel cancels it, and the wait needs no watcher of its own."""
        timeout = max(0.0, self.ends - time.monotonic())
        if self.cancel is not None and cancellable:
            self.cancel.on_set(future.cancel)
        elif self.cancel is not None:
            woken = threading.Event()
            future.add_done_callback(lambda _: woken.set())
            self.cancel.on_set(woken.set)
            woken.wait(timeout)
            if self.cancel.is_set() and not future.done():
                future.cancel()
                raise RunCancelledError(f"{self.what}: given up by the run's caller",
                                        sandbox_id=self.sandbox_id)
            timeout = 0
        try:
            return future.result(timeout=timeout)
        except FutureCancelled:
            if self.cancel is None or not self.cancel.is_set():
                raise
            raise RunCancelledError(f"{self.what}: given up by the run's caller",
                                    sandbox_id=self.sandbox_id) from None
        except FutureTimeout:
            future.cancel()  # an SDK's call on its loop ends; a daemon thread's cannot
            raise ProviderTimeoutError(f"{self.what}: no answer from {self.service} within "
                                       f"{self.deadline:.0f}s", sandbox_id=self.sandbox_id
                                       ) from None
