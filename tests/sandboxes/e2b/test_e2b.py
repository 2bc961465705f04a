"""The E2B provider: the real ``e2b`` SDK against a local server that speaks E2B's API
(tests/e2b_server), through the Ray pool. Faults are injected by the server (issue 39)."""

from __future__ import annotations

import logging
import sys
import time

import pytest
from helpers import remote_setup
from helpers.remote_setup import ENV, FAULT_ENV, LARGE, WRONG, map_one, options

from deepgym_ray import sandboxes
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    SandboxDiedError,
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
    is_infrastructure_failure,
)
from deepgym_ray.pool import get_pool

e2b = pytest.importorskip("e2b")

from deepgym_ray.sandboxes.e2b import E2BOptions, E2BProvider  # noqa: E402
from deepgym_ray.sandboxes.e2b.calls import translate  # noqa: E402

SLEEPER = "import time\ntime.sleep(600)\n" + ENV.reference_solution


@pytest.fixture
def server(e2b_server):
    e2b_server.faults.clear()
    yield e2b_server
    e2b_server.faults.clear()


@pytest.fixture(scope="module")
def pool_client(e2b_server, ray_local):
    """One E2B client and its Ray pool for the module (actors import the SDK once)."""
    client = remote_setup.pool_client("e2b", e2b_server, "e2b-tests")
    yield client
    get_pool(client).shutdown()


@pytest.fixture
def provider(server):
    made = E2BProvider(**options(server, call_timeout=5.0))
    yield made
    made.close()


# -- mode='auto' and start-up checks ----------------------------------------------------------


@pytest.fixture
def fresh_auto(monkeypatch):
    monkeypatch.setattr(sandboxes, "_warned_missing_sdk", set())
    for name in ("DAYTONA_API_KEY", "E2B_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_auto_picks_daytona_then_e2b_then_local(fresh_auto):
    assert sandboxes.resolve_mode("auto") == "local"
    fresh_auto.setenv("E2B_API_KEY", "e2b-key")
    assert sandboxes.resolve_mode("auto") == "e2b"
    assert sandboxes.provider_class("auto") is E2BProvider and sandboxes.is_io_bound("auto")
    fresh_auto.setenv("DAYTONA_API_KEY", "daytona-key")
    assert sandboxes.resolve_mode("auto") == ("daytona" if sandboxes._sdk_installed("daytona")
                                              else "e2b")


def test_auto_with_an_e2b_key_but_no_sdk_is_local_with_one_warning(fresh_auto, caplog):
    fresh_auto.setenv("E2B_API_KEY", "e2b-key")
    fresh_auto.setitem(sys.modules, "e2b", None)  # the SDK cannot be imported
    with caplog.at_level(logging.WARNING):
        assert sandboxes.resolve_mode("auto") == "local"
        assert sandboxes.resolve_mode("auto") == "local"
    warnings = [r.getMessage() for r in caplog.records if "E2B_API_KEY" in r.getMessage()]
    assert len(warnings) == 1 and "deepgym_ray[e2b]" in warnings[0]


def test_auto_with_an_e2b_key_runs_there(fresh_auto, server):
    for name, value in server.environ().items():
        fresh_auto.setenv(name, value)
    client = DeepGym(mode="auto", backend="threads", call_timeout=5.0)
    try:
        assert isinstance(client.provider, E2BProvider)
        assert client.run(ENV, ENV.reference_solution).score == 1.0
    finally:
        client.close()


def test_auto_with_an_e2b_key_for_an_unreachable_service_fails_at_once(fresh_auto):
    fresh_auto.setenv("E2B_API_KEY", "k")
    fresh_auto.setenv("E2B_API_URL", "http://127.0.0.1:9")
    with pytest.raises(ProviderUnavailableError, match="cannot use E2B") as caught:
        DeepGym(mode="auto", backend="threads", call_timeout=5.0)
    assert "\n" not in str(caught.value)


def test_a_wrong_or_missing_key_or_sdk_fails_at_client_creation_in_one_line(server,
                                                                            monkeypatch):
    wrong = {**options(server), "api_key": "wrong-key"}
    with pytest.raises(SandboxError) as info:
        DeepGym(mode="e2b", backend="threads", **wrong)
    assert "refused the API key" in str(info.value) and "401" in str(info.value)
    assert "\n" not in str(info.value)
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(SandboxError, match="E2B_API_KEY"):
        DeepGym(mode="e2b", backend="threads", api_url=server.api_url)
    monkeypatch.setitem(sys.modules, "e2b", None)
    with pytest.raises(SandboxError, match=r"needs the 'e2b' SDK"):
        E2BProvider.preflight(**options(server))


# -- error translation -----------------------------------------------------------------------


def test_sdk_errors_become_typed_errors_by_what_the_sdk_knows():
    from e2b import exceptions as x

    for error, status in ((x.RateLimitException("slow down"), 429),
                          (x.AuthenticationException("Unauthorized"), 401),
                          (x.ServiceBusyException("503: busy"), 503),
                          (x.SandboxException("500: boom"), 500),
                          (x.SandboxException("Code.INTERNAL: boom"), 500),
                          (x.SandboxException("forbidden", status_code=403), 403)):
        typed = translate(error, "call")
        assert isinstance(typed, ProviderHTTPError) and typed.status == status, (error, typed)
        assert is_infrastructure_failure(typed)
        # the raw error too, where it carries its status (the daemon's Connect code: not)
        assert is_infrastructure_failure(error) == (not str(error).startswith("Code."))
    assert isinstance(translate(x.TimeoutException("slow"), "call"), ProviderTimeoutError)
    assert is_infrastructure_failure(x.TimeoutException("slow"))
    dropped = x.SandboxUnreachableException("the connection was lost")
    assert isinstance(translate(dropped, "run", "sb"), ProviderConnectionError)
    refused = x.SandboxException("cannot connect")
    refused.__cause__ = ConnectionRefusedError(111, "refused")
    assert isinstance(translate(refused, "create"), ProviderConnectionError)
    assert is_infrastructure_failure(refused)
    # A sandbox gone: at the end of the lifetime we gave it, expired; before it, evicted.
    gone = x.SandboxNotRunningException("The sandbox sb was not found")
    expired = translate(gone, "run", "sb", ends_at=100.0, now=100.5)
    evicted = translate(gone, "run", "sb", ends_at=100.0, now=50.0)
    assert isinstance(expired, SandboxExpiredError) and not is_infrastructure_failure(expired)
    assert isinstance(evicted, SandboxEvictedError) and is_infrastructure_failure(evicted)
    assert not is_infrastructure_failure(gone)  # the raw SDK error does not say which
    died = translate(x.SandboxUnreachableException("502: port is not open"), "run", "sb")
    assert isinstance(died, SandboxDiedError) and not is_infrastructure_failure(died)


# -- the provider on the server ---------------------------------------------------------------


def test_sandboxes_are_offline_with_a_lifetime_reused_and_killed_on_close(server):
    provider = E2BProvider(**options(server, call_timeout=5.0, lifetime=120))
    client = DeepGym(provider=provider, backend="threads")
    try:
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        assert client.run(ENV, WRONG).score == 0.0
        (sid,) = provider.live_sandboxes()  # both runs in one sandbox, proven clean between
        box = server.boxes[sid]
        assert box.allow_internet is False
        assert box.metadata["deepgym.instance"] == provider.instance
        assert 100 < box.end_at - time.monotonic() <= 120  # a crashed actor's ends by itself
    finally:
        client.close()
        provider.close()
    assert sid not in server.live_sandboxes()


def test_a_run_that_may_outlive_the_lifetime_extends_it_and_so_does_an_old_idle_one(server):
    provider = E2BProvider(**options(server, call_timeout=5.0, lifetime=10))
    client = DeepGym(provider=provider, backend="threads")
    try:
        # coin_change may take 30 s: its sandbox, made to live 10, lives at least that long
        # (and the server ends it at that time: test_e2b_server_fidelity).
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        (sid,) = provider.live_sandboxes()
        assert server.boxes[sid].end_at - time.monotonic() > 25
        # Idle for most of its lifetime (as if): extended before it is handed the next run.
        provider._remotes[sid].ends_at = time.monotonic() + 3
        server.boxes[sid].end_at = time.monotonic() + 3
        assert client.run(FAULT_ENV, ENV.reference_solution).score == 1.0
        assert provider.live_sandboxes() == [sid]
        assert server.boxes[sid].end_at - time.monotonic() > 6
    finally:
        client.close()
        provider.close()


def _while_running(provider, server, answer, act):
    """``answer``'s result, ``act(sid)`` done once its command runs in a sandbox of
    ``provider``'s."""
    def running(server):
        with server.lock:
            return next((box.id for box in server.boxes.values() if box.procs and
                         box.metadata.get("deepgym.instance") == provider.instance), None)
    return remote_setup.result_while_running(provider, server, answer, running, act)


def test_a_sandbox_that_reaches_its_lifetime_mid_run_is_expired(server, provider):
    def expire(sid):
        provider._remotes[sid].ends_at = time.monotonic()
        server.boxes[sid].end_at = time.monotonic()

    result = _while_running(provider, server, SLEEPER, expire)
    assert not result.has_verdict and "SandboxExpiredError" in result.details, result


def test_a_sandbox_killed_mid_run_before_its_lifetime_is_evicted(server, provider):
    result = _while_running(provider, server, SLEEPER, server.kill)
    assert not result.has_verdict and "SandboxEvictedError" in result.details, result


# -- scoring through the pool -----------------------------------------------------------------


@pytest.mark.slow
def test_every_builtin_reference_scores_one_and_a_wrong_answer_zero(pool_client, server):
    remote_setup.check_every_builtin(pool_client)


# LARGE: a run whose spec is too large for one environment string, uploaded before its command
# (a run of a warm sandbox makes no other file call: see the test below).
FAULTS = [
    pytest.param(("process", "status", 500), "ProviderHTTPError: HTTP 500", id="500"),
    pytest.param(("files", "status", 503, LARGE), "ProviderHTTPError: HTTP 503", id="503"),
    pytest.param(("files", "status", 429, LARGE), "ProviderHTTPError: HTTP 429", id="429"),
    pytest.param(("process", "status", 401), "ProviderHTTPError: HTTP 401", id="401"),
    pytest.param(("process", "hang", 0), "ProviderTimeoutError", id="hung-call"),
    pytest.param(("process", "drop", 0), "ProviderConnectionError", id="dropped-stream"),
    pytest.param(("files", "drop", 0, LARGE), "ProviderConnectionError", id="dropped-upload"),
    pytest.param(("process", "vanish", 0), "SandboxEvictedError", id="sandbox-vanishes"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "expected"), FAULTS)
def test_each_fault_gives_no_verdict_with_its_error(pool_client, server, fault, expected):
    call, action, status, *answer = fault
    remote_setup.check_fault(pool_client, server, call, action, status, expected,
                             answer=answer[0] if answer else ENV.reference_solution)


def test_a_run_is_one_call_its_spec_in_the_commands_environment(pool_client, server):
    """With every file call failing, a warm sandbox's runs are still judged (the spec rides
    on the command); a spec too large for one environment string goes by upload, and fails
    with it."""
    assert map_one(pool_client, ENV.reference_solution, env=FAULT_ENV).score == 1.0  # warm
    server.faults.add("files", "status", status=503, times=None)
    try:
        assert [map_one(pool_client, a, env=FAULT_ENV).score
                for a in (ENV.reference_solution, WRONG)] == [1.0, 0.0]
        large = map_one(pool_client, LARGE, env=FAULT_ENV)
        assert not large.has_verdict and "HTTP 503" in (large.details or ""), large
    finally:
        server.faults.clear()
    assert map_one(pool_client, LARGE, env=FAULT_ENV).score == 1.0


@pytest.mark.slow
def test_a_batch_with_faults_sprinkled_in_gets_one_verdict_per_input(pool_client, server):
    remote_setup.check_sprinkled_faults(pool_client, server, [
        ("process", "status", 503, None, 0.15), ("files", "status", 429, 3, 1.0),
        ("process", "drop", 0, 1, 1.0), ("process", "hang", 0, 1, 1.0)])


def test_a_failed_create_has_no_verdict_and_a_throttled_one_waits_and_then_judges(server):
    server.faults.add("create", "status", status=502, times=1)
    provider = E2BProvider(**options(server, call_timeout=5.0, throttle_wait=60))
    client = DeepGym(provider=provider, backend="threads")
    try:
        failed = client.run_safe(ENV, ENV.reference_solution)
        assert not failed.has_verdict and "ProviderHTTPError: HTTP 502" in failed.details
        server.faults.clear()
        throttled = server.faults.add("create", "status", status=429, times=2)
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        assert throttled.hits == 2
    finally:
        client.close()
        provider.close()


# -- configuration and the command line -------------------------------------------------------


def test_the_e2b_config_file_is_valid():
    config = DeepGymConfig.from_yaml("configs/e2b.yaml")
    assert config.mode == "e2b" and config.pool.num_cpus_per_actor < 1
    assert E2BOptions(**config.provider_options).lifetime >= 60
    with pytest.raises(ValueError, match="no_such_option"):
        E2BOptions(no_such_option=1)


def test_cli_mode_e2b_runs(server, monkeypatch, capsys, tmp_path):
    from deepgym_ray.cli import main

    answer = tmp_path / "answer.py"
    answer.write_text(ENV.reference_solution)
    for name, value in server.environ().items():
        monkeypatch.setenv(name, value)
    assert main(["run", "coin_change", str(answer), "--mode", "e2b"]) == 0
    assert "coin_change: PASS score=1.0000" in capsys.readouterr().out
