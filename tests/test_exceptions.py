"""Which failures are infrastructure, and what a batch records for each raise."""

from __future__ import annotations

import builtins
import pickle
import socket

import pytest

from deepgym_ray import contract
from deepgym_ray.exceptions import (
    DeepGymError,
    DeepGymTimeoutError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SandboxDiedError,
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
    TimeoutError,
    VerifierError,
    error_type_for,
    is_infrastructure_failure,
)


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


INFRASTRUCTURE = [
    pytest.param(ProviderConnectionError("refused"), id="provider-connection"),
    pytest.param(ProviderTimeoutError("no answer in 30s"), id="provider-timeout"),
    pytest.param(builtins.ConnectionError("reset"), id="builtin-connection"),
    pytest.param(ConnectionResetError("reset by peer"), id="connection-reset"),
    pytest.param(ConnectionRefusedError("refused"), id="connection-refused"),
    pytest.param(socket.timeout("timed out"), id="socket-timeout"),  # noqa: UP041
    pytest.param(builtins.TimeoutError("call timed out"), id="builtin-timeout"),
    pytest.param(TimeoutError("run timed out before the answer was in play"), id="deepgym-timeout"),
    pytest.param(ProviderHTTPError(500, "internal"), id="http-500"),
    pytest.param(ProviderHTTPError(502), id="http-502"),
    pytest.param(ProviderHTTPError(503), id="http-503"),
    pytest.param(ProviderHTTPError(504), id="http-504"),
    pytest.param(ProviderHTTPError(429, "slow down"), id="http-429"),
    pytest.param(ProviderHTTPError(401, "bad key"), id="http-401"),
    pytest.param(ProviderHTTPError(403, "forbidden"), id="http-403"),
    pytest.param(SandboxEvictedError("reclaimed"), id="evicted"),
    pytest.param(VerifierError("SyntaxError in verifier.py"), id="verifier-could-not-run"),
    pytest.param(
        _chained(SandboxError("create failed"), ConnectionResetError()), id="wrapped-transport"
    ),
]

NOT_INFRASTRUCTURE = [
    pytest.param(SandboxDiedError("oom-killed"), id="sandbox-died"),
    pytest.param(SandboxExpiredError("lifetime over"), id="sandbox-expired"),
    pytest.param(ProviderHTTPError(400, "bad request"), id="http-400"),
    pytest.param(ProviderHTTPError(404, "no such sandbox"), id="http-404"),
    pytest.param(ProviderHTTPError(409, "conflict"), id="http-409"),
    pytest.param(VerifierError("crashed on the answer", in_play=True), id="verifier-in-play"),
    pytest.param(SandboxError("failed write"), id="plain-sandbox-error"),
    pytest.param(DeepGymError("unknown"), id="plain-deepgym-error"),
    pytest.param(ValueError("bad"), id="value-error"),
    pytest.param(KeyError("k"), id="key-error"),
    pytest.param(RuntimeError("boom"), id="runtime-error"),
    pytest.param(MemoryError(), id="memory-error"),
    pytest.param(FileNotFoundError("x"), id="file-not-found"),
    pytest.param(
        _chained(SandboxDiedError("died"), ConnectionResetError()), id="died-despite-cause"
    ),
]


@pytest.mark.parametrize("exc", INFRASTRUCTURE)
def test_infrastructure_failures(exc):
    assert is_infrastructure_failure(exc) is True


@pytest.mark.parametrize("exc", NOT_INFRASTRUCTURE)
def test_not_infrastructure(exc):
    assert is_infrastructure_failure(exc) is False


def test_http_client_transport_errors_are_infrastructure():
    requests = pytest.importorskip("requests")
    assert is_infrastructure_failure(requests.exceptions.ConnectionError("down"))
    assert is_infrastructure_failure(requests.exceptions.ReadTimeout("slow"))
    assert not is_infrastructure_failure(requests.exceptions.InvalidURL("nope"))


def test_dead_actor_is_infrastructure():
    ray_exceptions = pytest.importorskip("ray.exceptions")
    assert is_infrastructure_failure(ray_exceptions.RayActorError())
    assert not is_infrastructure_failure(ray_exceptions.RayError())


def test_deepgym_timeout_is_also_the_builtin():
    err = DeepGymTimeoutError("late")
    assert isinstance(err, builtins.TimeoutError)
    assert isinstance(err, DeepGymError)
    assert TimeoutError is DeepGymTimeoutError
    with pytest.raises(builtins.TimeoutError):
        raise err


def test_hierarchy():
    for cls in (SandboxDiedError, SandboxExpiredError, SandboxEvictedError, ProviderError):
        assert issubclass(cls, SandboxError)
    for cls in (ProviderConnectionError, ProviderTimeoutError, ProviderHTTPError):
        assert issubclass(cls, ProviderError)
    assert issubclass(VerifierError, DeepGymError)


@pytest.mark.parametrize(
    ("exc", "error_type"),
    [
        (SandboxError("x"), contract.SANDBOX_ERROR),
        (ProviderHTTPError(503), contract.SANDBOX_ERROR),
        (SandboxDiedError("x"), contract.SANDBOX_ERROR),
        (TimeoutError("x"), contract.TIMEOUT),
        (builtins.TimeoutError("x"), contract.TIMEOUT),
        (VerifierError("x"), contract.VERIFIER_ERROR),
        (ConnectionResetError(), contract.SANDBOX_ERROR),
        (ValueError("x"), contract.RUNTIME_ERROR),
    ],
)
def test_error_type_for_a_raise_is_never_a_verdict(exc, error_type):
    assert error_type_for(exc) == error_type
    assert error_type not in contract.MODEL_FAULT_ERRORS


@pytest.mark.parametrize(
    "exc",
    [
        ProviderHTTPError(503, "down", sandbox_id="sb-1"),
        VerifierError("no result", sandbox_id="sb-2", in_play=True),
        TimeoutError("late", sandbox_id="sb-3"),
        SandboxDiedError("gone", sandbox_id="sb-4"),
    ],
)
def test_exceptions_survive_pickling_with_their_fields(exc):
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    assert copy.sandbox_id == exc.sandbox_id
    assert is_infrastructure_failure(copy) == is_infrastructure_failure(exc)
    if isinstance(exc, ProviderHTTPError):
        assert copy.status == 503
    if isinstance(exc, VerifierError):
        assert copy.in_play is True


def test_the_cause_chain_is_walked_through_foreign_wrappers():
    class SdkError(Exception):  # a provider SDK's plain error: the real cause is inside
        pass

    assert is_infrastructure_failure(_chained(SdkError("failed"), ConnectionRefusedError()))
    assert is_infrastructure_failure(
        _chained(SdkError("outer"), _chained(SdkError("inner"), ProviderHTTPError(503))))
    assert not is_infrastructure_failure(_chained(SdkError("failed"), ValueError("bad")))
    looped = SdkError("a")
    looped.__cause__ = SdkError("b")
    looped.__cause__.__cause__ = looped  # a cycle ends the walk, it does not recurse forever
    assert not is_infrastructure_failure(looped)
