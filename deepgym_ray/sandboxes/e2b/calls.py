"""Calls into the ``e2b`` SDK, bounded by our own deadline (see ``remote.calls``).

Failures become :class:`~deepgym_ray.exceptions.SandboxError` subclasses by what the SDK
knows: the HTTP status of the control plane's answer (429 is ``RateLimitException``, 401
``AuthenticationException``, 503 ``ServiceBusyException``), the Connect code of the daemon's
(``Code.INTERNAL: ...``), a timeout, a connection dropped mid-call, and a sandbox that is no
longer there (``SandboxNotRunningException``, the control plane's 404): expired when that
came at the end of the lifetime we gave it, removed by the cloud (evicted) before. A sandbox
still running whose daemon stopped answering (the proxy's "port is not open") died inside.

Example:
    >>> translate(ConnectionRefusedError("refused"), "create a sandbox")  # doctest: +ELLIPSIS
    ProviderConnectionError('create a sandbox: ...')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SandboxDiedError,
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
    sdk_http_status,
)
from deepgym_ray.sandboxes.remote import calls as remote_calls
from deepgym_ray.sandboxes.remote.calls import chain

__all__ = ["bounded", "translate"]

T = TypeVar("T")
# The Connect codes' statuses (the daemon's errors say "Code.INTERNAL: ...").
_CONNECT_STATUS = {"Code.INTERNAL": 500, "Code.UNKNOWN": 500, "Code.UNAVAILABLE": 503,
                   "Code.RESOURCE_EXHAUSTED": 429, "Code.PERMISSION_DENIED": 403,
                   "Code.UNAUTHENTICATED": 401}
_TRANSPORT = ("ConnectError", "ReadError", "WriteError", "RemoteProtocolError",
              "NewConnectionError", "ProtocolError", "RemoteDisconnected", "ConnectTimeout",
              "ReadTimeout", "PoolTimeout", "WriteTimeout")


def _sdk_name(exc: BaseException) -> str:
    return type(exc).__name__ if type(exc).__module__.startswith("e2b") else ""


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK error stands for, if it says (its Connect code counts)."""
    if "AuthenticationException" in {cls.__name__ for cls in type(exc).__mro__}:
        return 401
    status = sdk_http_status(exc)
    if status is not None:
        return status
    text = str(exc)
    return next((s for code, s in _CONNECT_STATUS.items() if text.startswith(code)), None)


def translate(exc: BaseException, what: str, sandbox_id: str | None = None,
              ends_at: float | None = None, now: float | None = None) -> SandboxError:
    """The SandboxError for an SDK failure of the call ``what``; ``sandbox_id`` when the call
    was about a sandbox we hold, ``ends_at`` (monotonic) where its lifetime ends, and ``now``."""
    if isinstance(exc, SandboxError):
        return exc
    message = f"{what}: {exc}"
    names = {_sdk_name(e) for e in chain(exc)}
    gone = bool(names & {"SandboxNotRunningException", "SandboxNotFoundException"}) or (
        sandbox_id is not None and "NotFoundException" in names and "sandbox" in str(exc))
    if gone and sandbox_id is not None:
        if ends_at is not None and now is not None and now >= ends_at - 1.0:
            return SandboxExpiredError(f"{what}: the sandbox reached the end of its lifetime "
                                       f"({exc})", sandbox_id=sandbox_id)
        return SandboxEvictedError(f"{what}: the sandbox is gone ({exc})",
                                   sandbox_id=sandbox_id)
    if "SandboxUnreachableException" in names and "port is not open" in str(exc):
        return SandboxDiedError(f"{what}: the sandbox runs but its daemon died ({exc})",
                                sandbox_id=sandbox_id)
    status = status_of(exc)
    if status is not None and status != 404:
        return ProviderHTTPError(status, message, sandbox_id=sandbox_id)
    for link in chain(exc):
        name = type(link).__name__
        transport = name in _TRANSPORT and not type(link).__module__.startswith("connectrpc")
        if transport or isinstance(link, ConnectionError) \
                or name == "SandboxUnreachableException":
            if "Timeout" in name:
                return ProviderTimeoutError(message, sandbox_id=sandbox_id)
            return ProviderConnectionError(message, sandbox_id=sandbox_id)
        if isinstance(link, TimeoutError) or name == "TimeoutException":
            return ProviderTimeoutError(message, sandbox_id=sandbox_id)
    error = SandboxError(message, sandbox_id=sandbox_id)
    error.__cause__ = exc
    return error


def bounded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """:func:`deepgym_ray.sandboxes.remote.calls.bounded` with E2B's ``translate``."""
    return remote_calls.bounded(fn, *args, translate=translate, service="E2B", **kwargs)
