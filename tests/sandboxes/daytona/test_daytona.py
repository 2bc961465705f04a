"""The Daytona provider: the real ``daytona`` SDK against a local server that speaks its API
(tests/daytona_server), through the Ray pool. Faults are injected by the server."""

from __future__ import annotations

import logging
import sys

import pytest
from helpers import remote_setup
from helpers.remote_setup import ENV, options

from deepgym_ray import sandboxes
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SandboxError,
    SandboxEvictedError,
    is_infrastructure_failure,
)
from deepgym_ray.pool import default_shape, get_pool

pytest.importorskip("daytona")

from deepgym_ray.sandboxes.daytona import DaytonaProvider  # noqa: E402
from deepgym_ray.sandboxes.daytona.calls import bounded, translate  # noqa: E402


@pytest.fixture
def server(daytona_server):
    daytona_server.faults.clear()
    yield daytona_server
    daytona_server.faults.clear()


@pytest.fixture(scope="module")
def pool_client(daytona_server, ray_local):
    """One Daytona client and its Ray pool for the module (actors import the SDK once)."""
    client = remote_setup.pool_client("daytona", daytona_server, "daytona-tests")
    yield client
    get_pool(client).shutdown()


# -- mode='auto' and start-up checks ------------------------------------------------------------


@pytest.fixture
def fresh_auto(monkeypatch):
    monkeypatch.setattr(sandboxes, "_warned_missing_sdk", set())
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    return monkeypatch


def test_auto_without_a_key_is_local(fresh_auto, caplog):
    fresh_auto.delenv("DAYTONA_API_KEY", raising=False)
    with caplog.at_level(logging.WARNING):
        assert sandboxes.resolve_mode("auto") == "local"
        assert sandboxes.provider_class("auto").name == "local"
        assert not sandboxes.is_io_bound("auto")
    assert not [r for r in caplog.records if "DAYTONA" in r.getMessage()]


def test_auto_with_a_key_but_no_sdk_is_local_with_one_warning(fresh_auto, caplog):
    fresh_auto.setenv("DAYTONA_API_KEY", "some-key")
    fresh_auto.setitem(sys.modules, "daytona", None)  # the SDK cannot be imported
    with caplog.at_level(logging.WARNING):
        assert sandboxes.resolve_mode("auto") == "local"
        assert sandboxes.resolve_mode("auto") == "local"
    warnings = [r for r in caplog.records if "DAYTONA_API_KEY" in r.getMessage()]
    assert len(warnings) == 1


def test_auto_with_a_key_and_the_sdk_is_daytona_and_runs(fresh_auto, server):
    fresh_auto.setenv("DAYTONA_API_KEY", server.api_key)
    fresh_auto.setenv("DAYTONA_API_URL", server.url)
    client = DeepGym(mode="auto", backend="threads")
    try:
        assert isinstance(client.provider, DaytonaProvider)
        assert client.run(ENV, ENV.reference_solution).score == 1.0
    finally:
        client.close()
    assert default_shape("auto", 2, max_parallel=200) == (2, 100)  # io_bound, read by the pool


@pytest.mark.parametrize("key", [None, "some-key"])
@pytest.mark.parametrize("sdk", [True, False])
def test_auto_never_resolves_to_a_provider_that_is_not_there(fresh_auto, key, sdk):
    """A key and the SDK once made 'auto' name a provider module that did not exist, and every
    run failed. Whatever the environment, auto names a registered provider that imports."""
    if key is None:
        fresh_auto.delenv("DAYTONA_API_KEY", raising=False)
    else:
        fresh_auto.setenv("DAYTONA_API_KEY", key)
    if not sdk:
        fresh_auto.setitem(sys.modules, "daytona", None)
    mode = sandboxes.resolve_mode("auto")
    assert mode == ("daytona" if key and sdk else "local")
    assert mode in sandboxes.PROVIDERS
    found = sandboxes.provider_class("auto")
    assert issubclass(found, sandboxes.SandboxProvider) and found.name == mode


def test_auto_with_a_key_for_an_unreachable_server_fails_at_client_creation(fresh_auto):
    """Auto with a key never builds a client whose every run would fail: it fails at once."""
    from deepgym_ray.exceptions import ProviderUnavailableError

    fresh_auto.setenv("DAYTONA_API_KEY", "k")
    fresh_auto.setenv("DAYTONA_API_URL", "http://127.0.0.1:9/api")
    with pytest.raises(ProviderUnavailableError, match="daytona"):
        DeepGym(mode="auto", backend="threads", call_timeout=5.0)


def test_a_wrong_key_fails_at_client_creation_in_one_line(server):
    with pytest.raises(SandboxError) as info:
        DeepGym(mode="daytona", backend="threads", api_key="wrong-key", api_url=server.url)
    message = str(info.value)
    assert "refused the API key" in message and "401" in message and "\n" not in message


def test_a_missing_key_or_sdk_fails_at_client_creation(server, monkeypatch):
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    with pytest.raises(SandboxError, match="DAYTONA_API_KEY"):
        DeepGym(mode="daytona", backend="threads", api_url=server.url)
    monkeypatch.setitem(sys.modules, "daytona", None)
    with pytest.raises(SandboxError, match=r"needs the 'daytona' SDK"):
        DaytonaProvider.preflight(**options(server))


def test_an_unreachable_server_fails_at_client_creation(server):
    from deepgym_ray.exceptions import ProviderUnavailableError

    with pytest.raises(ProviderUnavailableError, match="cannot use Daytona") as caught:
        DeepGym(mode="daytona", backend="threads", api_key="k",
                api_url="http://127.0.0.1:9/api", call_timeout=5.0)
    assert isinstance(caught.value.__cause__, ProviderConnectionError)
    assert "\n" not in str(caught.value)


# -- error translation -------------------------------------------------------------------------


def test_sdk_errors_become_typed_infrastructure_failures(server):
    import daytona

    refused = daytona.DaytonaError("Failed to get sandbox: refused")
    refused.__cause__ = ConnectionRefusedError(111, "refused")
    assert isinstance(translate(refused, "get"), ProviderConnectionError)
    for status in (500, 502, 503, 429, 401, 403):
        error = translate(daytona.DaytonaError("x", status_code=status), "call")
        assert isinstance(error, ProviderHTTPError) and error.status == status
        assert is_infrastructure_failure(error)
    assert isinstance(translate(daytona.DaytonaError("x", status_code=408), "c"),
                      ProviderTimeoutError)
    gone = translate(daytona.DaytonaNotFoundError("x", status_code=404), "run", "sb-1")
    assert isinstance(gone, SandboxEvictedError) and is_infrastructure_failure(gone)
    assert isinstance(translate(daytona.DaytonaSpotEvictedError("x"), "run", "sb"),
                      SandboxEvictedError)
    # The plain SDK error wrapping a refused connection is infrastructure by its cause chain.
    assert is_infrastructure_failure(refused)


def test_a_hung_call_is_given_up_at_our_deadline(server):
    import threading

    release = threading.Event()
    with pytest.raises(ProviderTimeoutError, match="within"):
        bounded(release.wait, 30, deadline=0.2, what="hang")
    release.set()


# -- scoring through the pool ------------------------------------------------------------------


@pytest.mark.slow
def test_every_builtin_reference_scores_one_and_a_wrong_answer_zero(pool_client, server):
    remote_setup.check_every_builtin(pool_client)


FAULTS = [
    pytest.param(("execute", "status", 500), "ProviderHTTPError: HTTP 500", id="500"),
    pytest.param(("execute", "status", 503), "ProviderHTTPError: HTTP 503", id="503"),
    pytest.param(("execute", "status", 429), "ProviderHTTPError: HTTP 429", id="429"),
    pytest.param(("execute", "status", 401), "ProviderHTTPError: HTTP 401", id="401"),
    pytest.param(("execute", "status", 403), "ProviderHTTPError: HTTP 403", id="403"),
    pytest.param(("execute", "hang", 0), "ProviderTimeoutError", id="hung-call"),
    pytest.param(("execute", "drop", 0), "ProviderConnectionError", id="dropped"),
    pytest.param(("execute", "vanish", 0), "SandboxEvictedError", id="sandbox-vanishes"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "expected"), FAULTS)
def test_each_fault_gives_no_verdict_with_its_error(pool_client, server, fault, expected):
    call, action, status = fault
    # The SDK retries a dropped toolbox connection itself (three times): drop them all.
    remote_setup.check_fault(pool_client, server, call, action, status, expected,
                             times=None if action == "drop" else 1)


@pytest.mark.slow
def test_a_batch_with_faults_sprinkled_in_gets_one_verdict_per_input(pool_client, server):
    remote_setup.check_sprinkled_faults(pool_client, server, [
        ("execute", "status", 503, None, 0.15), ("execute", "status", 429, 3, 1.0),
        ("execute", "hang", 0, 1, 1.0)])


# -- configuration and the command line -------------------------------------------------------


def test_the_daytona_config_file_is_valid():
    from deepgym_ray.sandboxes.daytona import DaytonaOptions

    config = DeepGymConfig.from_yaml("configs/daytona.yaml")
    assert config.mode == "daytona" and config.pool.num_cpus_per_actor < 1
    options = DaytonaOptions(**config.provider_options)
    assert options.auto_stop_minutes >= 1 and options.auto_delete_minutes >= 0
    with pytest.raises(ValueError, match="no_such_option"):
        DaytonaOptions(no_such_option=1)


def test_cli_mode_daytona_runs_and_a_wrong_key_is_one_line(server, monkeypatch, capsys,
                                                           tmp_path):
    from deepgym_ray.cli import main

    answer = tmp_path / "answer.py"
    answer.write_text(ENV.reference_solution)
    monkeypatch.setenv("DAYTONA_API_URL", server.url)
    monkeypatch.setenv("DAYTONA_API_KEY", server.api_key)
    assert main(["run", "coin_change", str(answer), "--mode", "daytona"]) == 0
    assert "coin_change: PASS score=1.0000" in capsys.readouterr().out
    monkeypatch.setenv("DAYTONA_API_KEY", "wrong-key")
    assert main(["run", "coin_change", str(answer), "--mode", "daytona"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refused the API key" in err
