"""Calls into the ``modal`` SDK, bounded by our own deadline (see ``remote.calls``).

Failures become :class:`~deepgym_ray.exceptions.SandboxError` subclasses by what the SDK
knows: the gRPC status of Modal's answer (after the SDK's own retries of the transient ones:
UNAVAILABLE and INTERNAL are the service's 5xx, RESOURCE_EXHAUSTED its 429, UNAUTHENTICATED
and PERMISSION_DENIED its 401 and 403, DEADLINE_EXCEEDED a timeout), a connection that could
not be made or broke, and a sandbox that is no longer there (NOT_FOUND, "already finished", or
Modal's ``SandboxTimeoutError``): expired when that came at the end of the lifetime we gave it,
removed by Modal (evicted) before.

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
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
)
from deepgym_ray.sandboxes.remote import calls as remote_calls
from deepgym_ray.sandboxes.remote.calls import chain

__all__ = ["bounded", "grpc_status", "translate"]

T = TypeVar("T")
# The HTTP status each gRPC status of Modal's stands for.
HTTP_FOR_GRPC = {"UNAVAILABLE": 503, "INTERNAL": 500, "UNKNOWN": 500, "CANCELLED": 503,
                 "DATA_LOSS": 500, "RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401,
                 "PERMISSION_DENIED": 403}
_GONE = {"NotFoundError", "SandboxTerminatedError", "ClientClosed"}
_TRANSPORT = {"StreamTerminatedError", "ProtocolError", "H2ProtocolError"}


def _sdk_name(exc: BaseException) -> str:
    module = type(exc).__module__
    return type(exc).__name__ if module.startswith(("modal", "grpclib", "h2")) else ""


def grpc_status(exc: BaseException) -> str | None:
    """The name of the gRPC status an SDK error carries (``UNAVAILABLE``), if it does."""
    status = getattr(exc, "_grpc_status", None) or getattr(exc, "status", None)
    if type(status).__module__.startswith("grpclib"):
        return status.name
    return None


def translate(exc: BaseException, what: str, sandbox_id: str | None = None,
              ends_at: float | None = None, now: float | None = None) -> SandboxError:
    """The SandboxError for an SDK failure of the call ``what``; ``sandbox_id`` when the call
    was about a sandbox we hold, ``ends_at`` (monotonic) where its lifetime ends, and ``now``."""
    if isinstance(exc, SandboxError):
        return exc
    message = f"{what}: {exc}"
    names = {_sdk_name(e) for e in chain(exc)}
    status = next((s for s in map(grpc_status, chain(exc)) if s), None)
    finished = "ConflictError" in names and "finished" in str(exc)
    if sandbox_id is not None and "SandboxTimeoutError" in names:
        return SandboxExpiredError(f"{what}: the sandbox reached the end of its lifetime "
                                   f"({exc})", sandbox_id=sandbox_id)
    if sandbox_id is not None and (names & _GONE or finished):
        if ends_at is not None and now is not None and now >= ends_at - 1.0:
            return SandboxExpiredError(f"{what}: the sandbox reached the end of its lifetime "
                                       f"({exc})", sandbox_id=sandbox_id)
        return SandboxEvictedError(f"{what}: the sandbox is gone ({exc})",
                                   sandbox_id=sandbox_id)
    if status == "DEADLINE_EXCEEDED":
        return ProviderTimeoutError(message, sandbox_id=sandbox_id)
    if status in HTTP_FOR_GRPC:
        return ProviderHTTPError(HTTP_FOR_GRPC[status], message, sandbox_id=sandbox_id)
    for link in chain(exc):
        name = _sdk_name(link)
        if isinstance(link, TimeoutError) or name.endswith("TimeoutError"):
            return ProviderTimeoutError(message, sandbox_id=sandbox_id)
        if name == "ConnectionError" or name in _TRANSPORT or isinstance(link, OSError):
            return ProviderConnectionError(message, sandbox_id=sandbox_id)
    # Modal's own error types say what is wrong (InvalidError, ConflictError, ...)
    named = f"{what}: {type(exc).__name__}: {exc}" if _sdk_name(exc) else message
    error = SandboxError(named, sandbox_id=sandbox_id)
    error.__cause__ = exc
    return error


def bounded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """:func:`deepgym_ray.sandboxes.remote.calls.bounded` with Modal's ``translate``."""
    return remote_calls.bounded(fn, *args, translate=translate, service="Modal", **kwargs)
