"""Calls into the ``daytona`` SDK, bounded by our own deadline (see ``remote.calls``).

Failures become :class:`~deepgym_ray.exceptions.SandboxError` subclasses that say what went
wrong: the connection, a timeout, an HTTP status, or a sandbox that is gone.

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
from deepgym_ray.sandboxes.remote.calls import chain, retry_after

__all__ = ["bounded", "retry_after", "translate"]

T = TypeVar("T")

# Statuses that mean "this sandbox is no longer there" when the call was about one we hold.
GONE_STATUSES = frozenset({404, 410})


def _sdk_class(exc: BaseException) -> str:
    return type(exc).__name__ if type(exc).__module__.startswith("daytona") else ""


def translate(exc: BaseException, what: str, sandbox_id: str | None = None) -> SandboxError:
    """The SandboxError for an SDK failure of the call ``what``; ``sandbox_id`` when the call
    was about a sandbox we hold (then 404/410 mean it is gone, not a bad request)."""
    if isinstance(exc, SandboxError):
        return exc
    message = f"{what}: {exc}"
    names = {_sdk_class(e) for e in chain(exc)}
    if "DaytonaSpotEvictedError" in names:
        return SandboxEvictedError(message, sandbox_id=sandbox_id)
    if "DaytonaQueueTimeoutError" in names:
        return SandboxExpiredError(message, sandbox_id=sandbox_id)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status in GONE_STATUSES and sandbox_id is not None:
            return SandboxEvictedError(f"{what}: the sandbox is gone ({exc})",
                                       sandbox_id=sandbox_id)
        if status == 408:
            return ProviderTimeoutError(message, sandbox_id=sandbox_id)
        return ProviderHTTPError(status, message, sandbox_id=sandbox_id,
                                 retry_after=retry_after(getattr(exc, "headers", None)))
    if names & {"DaytonaTimeoutError", "DaytonaConnectionTimeoutError"}:
        return ProviderTimeoutError(message, sandbox_id=sandbox_id)
    # A refused or broken connection arrives as a plain DaytonaError; its cause says which.
    for link in chain(exc):
        if isinstance(link, TimeoutError) or "Timeout" in type(link).__name__:
            return ProviderTimeoutError(message, sandbox_id=sandbox_id)
        if isinstance(link, ConnectionError) or type(link).__name__ in (
                "NewConnectionError", "ProtocolError", "MaxRetryError", "RemoteDisconnected",
                "ConnectError", "ReadError", "RemoteProtocolError", "WriteError"):
            return ProviderConnectionError(message, sandbox_id=sandbox_id)
    error = SandboxError(message, sandbox_id=sandbox_id)
    error.__cause__ = exc
    return error


def bounded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """:func:`deepgym_ray.sandboxes.remote.calls.bounded` with Daytona's ``translate``."""
    return remote_calls.bounded(fn, *args, translate=translate, service="Daytona", **kwargs)
