"""Exception types, and the rule that tells an infrastructure failure from anything else.

Each DeepGym exception knows the ``error_type`` a batch records for it when the raise is turned
into a result without a verdict.

Example:
    >>> is_infrastructure_failure(ProviderHTTPError(503, "unavailable"))
    True
    >>> is_infrastructure_failure(ProviderHTTPError(404, "no such sandbox"))
    False
    >>> is_infrastructure_failure(KeyError("x"))
    False
"""

from __future__ import annotations

import builtins
import re
import sys

from deepgym_ray import contract


class DeepGymError(Exception):
    """Base of every error deepgym_ray raises on purpose."""

    error_type: str = contract.RUNTIME_ERROR

    def __init__(self, message: str = "", *, sandbox_id: str | None = None) -> None:
        super().__init__(message)
        self.sandbox_id = sandbox_id


class SandboxError(DeepGymError):
    """The sandbox or its provider failed; the answer was not judged."""

    error_type = contract.SANDBOX_ERROR


class SandboxDiedError(SandboxError):
    """The sandbox died while it was running."""


class SandboxExpiredError(SandboxError):
    """The provider retired the sandbox at the end of its lifetime."""


class SandboxEvictedError(SandboxError):
    """The provider evicted the sandbox (reclaimed it for capacity)."""


class ProviderError(SandboxError):
    """A call to a sandbox provider failed."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached, or the connection broke mid-call."""


class ProviderTimeoutError(ProviderError):
    """A call to the provider did not answer in time."""


class ProviderHTTPError(ProviderError):
    """The provider answered a call with an HTTP error status; ``retry_after``: the seconds its
    ``Retry-After`` header asked for, when it sent one."""

    def __init__(self, status: int, message: str = "", *, sandbox_id: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}",
                         sandbox_id=sandbox_id)
        self.status = int(status)
        self.message = message
        self.retry_after = retry_after

    def __reduce__(self):  # Ray pickles exceptions between processes; keep the status
        return (self.__class__, (self.status, self.message), self.__dict__)


class ProviderUnavailableError(SandboxError):
    """The sandbox provider a mode names cannot run here: not built, no engine, no credentials.

    Raised once, when a client is made (the provider's ``preflight``), before any work; its
    message is one line saying what is missing.
    """


class VerifierError(DeepGymError):
    """The verifier could not judge: it crashed, printed no result, or reported its own error.

    ``in_play`` says whether the policy's answer had come into play when it failed; a verifier
    that never got that far is an infrastructure failure.
    """

    error_type = contract.VERIFIER_ERROR

    def __init__(
        self, message: str = "", *, sandbox_id: str | None = None, in_play: bool = False
    ) -> None:
        super().__init__(message, sandbox_id=sandbox_id)
        self.in_play = in_play


class TimeoutError(DeepGymError, builtins.TimeoutError):  # noqa: A001 - the public name
    """The run's time limit ran out before the answer was in play. Also a builtin TimeoutError."""

    error_type = contract.TIMEOUT


DeepGymTimeoutError = TimeoutError


class RunCancelledError(DeepGymError):
    """The run's caller gave up on it (a map given up: Ctrl-C, a closed generator, a trainer
    that stopped), and its processes were stopped before it judged anything. Never a verdict;
    never retried."""

    error_type = contract.CANCELLED

# HTTP statuses that are the provider's fault or refuse our credentials: never the answer's.
INFRASTRUCTURE_HTTP_STATUSES = frozenset({401, 403, 429})

# Transport errors of common HTTP clients, by module and class name, checked only when that
# module is already imported (so checking costs no import).
_TRANSPORT_ERRORS = {
    "requests.exceptions": ("ConnectionError", "Timeout"),
    "urllib3.exceptions": ("ProtocolError", "TimeoutError", "NewConnectionError",
                           "MaxRetryError"),
    "httpx": ("TransportError",),
    "aiohttp": ("ClientConnectionError", "ServerTimeoutError"),
    "http.client": ("RemoteDisconnected", "IncompleteRead"),
    # A dead verifier actor or a lost node: the run never finished, through no fault of its own.
    "ray.exceptions": ("RayActorError", "ActorDiedError", "ActorUnavailableError",
                       "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                       "WorkerCrashedError", "LocalRayletDiedError"),
}


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, (builtins.ConnectionError, builtins.TimeoutError)):
        return True
    for module_name, class_names in _TRANSPORT_ERRORS.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for class_name in class_names:
            cls = getattr(module, class_name, None)
            if isinstance(cls, type) and isinstance(exc, cls):
                return True
    return False


def is_infrastructure_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is certainly ours (infrastructure) rather than the answer's.

    True for: connection and transport errors, a provider call timing out, provider HTTP 5xx,
    429, 401 and 403 (ours, or a provider SDK's error carrying that status), the provider
    evicting the sandbox, a verifier that could not run before the answer was in play, a dead
    actor or lost node, and an exception whose cause chain leads to one of these. False for
    everything else, including a sandbox that died, a sandbox that expired, and exceptions
    this rule does not know.
    """
    return _is_infrastructure(exc, depth=0)


def _is_infrastructure(exc: BaseException, depth: int) -> bool:
    if isinstance(exc, ProviderHTTPError):
        return exc.status >= 500 or exc.status in INFRASTRUCTURE_HTTP_STATUSES
    if isinstance(exc, (ProviderConnectionError, ProviderTimeoutError, SandboxEvictedError)):
        return True
    if isinstance(exc, VerifierError):
        return not exc.in_play
    if isinstance(exc, (SandboxDiedError, SandboxExpiredError)):
        return False
    if isinstance(exc, TimeoutError):  # our run-level timeout: the answer was not in play yet
        return True
    if _is_transport_error(exc):
        return True
    if type(exc).__name__ in _SDK_INFRASTRUCTURE.get(type(exc).__module__, ()):
        return True
    status = sdk_http_status(exc)
    if status is not None:
        return status >= 500 or status in INFRASTRUCTURE_HTTP_STATUSES
    # A generic wrapper (ours, or a provider SDK's own error type) is as much infrastructure as
    # what it wraps: a refused connection reaches us as the SDK's plain error, cause inside.
    if exc.__cause__ is not None and (type(exc) in (DeepGymError, SandboxError, ProviderError)
                                      or not isinstance(exc, DeepGymError)):
        return depth < 20 and _is_infrastructure(exc.__cause__, depth + 1)  # cycles end here
    return False


# SDK errors that carry no HTTP status but are ours for certain, by module and exact class
# name (E2B's subclasses of TimeoutException say a sandbox is gone, which is not certain).
_SDK_INFRASTRUCTURE = {
    "e2b.exceptions": ("AuthenticationException", "TimeoutException"),
    # Modal's, by the gRPC status they stand for (5xx, 429, 401, 403) and its lost connection
    "modal.exception": ("AuthError", "ConnectionError", "InternalError", "PermissionDeniedError",
                        "ResourceExhaustedError", "ServiceError"),
}

# Provider SDKs whose errors carry the HTTP status as ``status_code`` (checked by module name,
# so nothing is imported to check).
_SDK_MODULE_PREFIXES = ("daytona", "e2b")
_STATUS_PREFIX = re.compile(r"^([1-5]\d\d): ")


def sdk_http_status(exc: BaseException) -> int | None:
    """The HTTP status a provider SDK's error carries (``status_code``, or E2B's "NNN: "
    message prefix), if it is one of theirs and says."""
    if not type(exc).__module__.startswith(_SDK_MODULE_PREFIXES):
        return None
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    # E2B's daemon errors carry it only in their message: "500: ..."
    found = _STATUS_PREFIX.match(str(exc))
    return int(found.group(1)) if found else None


def error_type_for(exc: BaseException) -> str:
    """The ``error_type`` a batch records when a run raised ``exc`` (never a model fault)."""
    if isinstance(exc, DeepGymError):
        return exc.error_type
    if isinstance(exc, builtins.TimeoutError):
        return contract.TIMEOUT
    if _is_transport_error(exc):
        return contract.SANDBOX_ERROR
    return contract.RUNTIME_ERROR


def describe_error(exc: BaseException) -> str:
    """``Type: first line of the message``, at most 300 characters: an error for a log line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
