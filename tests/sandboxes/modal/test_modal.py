"""The Modal provider: the real ``modal`` client against a local server that speaks Modal's
gRPC API (tests/modal_server), through the Ray pool. Faults are injected by the server
(issue 39)."""

from __future__ import annotations

import logging
import sys
import time

import pytest
from helpers import remote_setup
from helpers.remote_setup import ENV, FAULT_ENV, LARGE, WRONG, options

from deepgym_ray import sandboxes
from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig
from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    SandboxError,
    SandboxEvictedError,
    SandboxExpiredError,
    is_infrastructure_failure,
)
from deepgym_ray.models import Environment
from deepgym_ray.pool import get_pool

modal = pytest.importorskip("modal")

from deepgym_ray.sandboxes.modal import ModalOptions, ModalProvider  # noqa: E402
from deepgym_ray.sandboxes.modal.calls import translate  # noqa: E402

SLEEPER = "import time\ntime.sleep(600)\n" + ENV.reference_solution


@pytest.fixture
def server(modal_server):
    modal_server.faults.clear()
    yield modal_server
    modal_server.faults.clear()


@pytest.fixture(scope="module")
def pool_client(modal_server, ray_local):
    """One Modal client and its Ray pool for the module (actors import the SDK once)."""
    client = remote_setup.pool_client("modal", modal_server, "modal-tests")
    yield client
    get_pool(client).shutdown()


@pytest.fixture
def provider(server):
    made = ModalProvider(**options(server, call_timeout=5.0))
    yield made
    made.close()


# -- mode='auto' and start-up checks ----------------------------------------------------------


@pytest.fixture
def fresh_auto(monkeypatch, tmp_path):
    monkeypatch.setattr(sandboxes, "_warned_missing_sdk", set())
    for name in ("DAYTONA_API_KEY", "E2B_API_KEY", "MODAL_TOKEN_ID", "MODAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "modal.toml"))
    return monkeypatch


def test_auto_picks_modal_after_daytona_and_e2b_by_its_token_or_its_config_file(fresh_auto,
                                                                               tmp_path):
    assert sandboxes.resolve_mode("auto") == "local"
    # `modal token new` writes a profile of the config file, marked active
    (tmp_path / "modal.toml").write_text('[other]\ntoken_id = "ak-old"\n\n'
                                         '[mine]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\n'
                                         'active = true\n')
    assert sandboxes.resolve_mode("auto") == "modal"
    assert sandboxes.provider_class("auto") is ModalProvider and sandboxes.is_io_bound("auto")
    (tmp_path / "modal.toml").write_text('[a]\ntoken_id = "ak-1"\n\n[b]\ntoken_id = "ak-2"\n')
    assert sandboxes.resolve_mode("auto") == "local"  # two profiles, none active
    fresh_auto.setenv("MODAL_TOKEN_ID", "ak-env")
    assert sandboxes.resolve_mode("auto") == "modal"
    fresh_auto.setenv("E2B_API_KEY", "e2b-key")
    assert sandboxes.resolve_mode("auto") == "e2b"


def test_auto_with_a_modal_token_but_no_sdk_is_local_with_one_warning(fresh_auto, caplog):
    fresh_auto.setenv("MODAL_TOKEN_ID", "ak-1")
    fresh_auto.setitem(sys.modules, "modal", None)  # the SDK cannot be imported
    with caplog.at_level(logging.WARNING):
        assert sandboxes.resolve_mode("auto") == "local"
        assert sandboxes.resolve_mode("auto") == "local"
    warnings = [r.getMessage() for r in caplog.records if "MODAL_TOKEN_ID" in r.getMessage()]
    assert len(warnings) == 1 and "deepgym_ray[modal]" in warnings[0]


def test_auto_with_a_modal_token_runs_there_and_an_unreachable_service_fails_at_once(
        fresh_auto, server):
    for name, value in server.environ().items():
        fresh_auto.setenv(name, value)
    client = DeepGym(mode="auto", backend="threads", call_timeout=5.0)
    try:
        assert isinstance(client.provider, ModalProvider)
        assert client.run(ENV, ENV.reference_solution).score == 1.0
    finally:
        client.close()
    with pytest.raises(ProviderUnavailableError, match="cannot use Modal") as caught:
        DeepGym(mode="auto", backend="threads", call_timeout=3.0,
                server_url="http://127.0.0.1:9")
    assert "\n" not in str(caught.value)


def test_a_wrong_or_missing_token_or_sdk_fails_at_client_creation_in_one_line(server,
                                                                              monkeypatch):
    wrong = {**options(server), "token_secret": "wrong"}
    with pytest.raises(SandboxError) as info:
        DeepGym(mode="modal", backend="threads", **wrong)
    assert "refused" in str(info.value) and "401" in str(info.value)
    assert "\n" not in str(info.value)
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SandboxError, match="MODAL_TOKEN_ID"):
        DeepGym(mode="modal", backend="threads", server_url=server.url)
    monkeypatch.setitem(sys.modules, "modal", None)
    with pytest.raises(SandboxError, match=r"needs the 'modal' SDK"):
        ModalProvider.preflight(**options(server))


# -- error translation -----------------------------------------------------------------------


def _sdk_error(cls, status_name: str, message: str = "boom"):
    """A Modal error as its client makes it from a gRPC status."""
    from grpclib import GRPCError, Status
    from modal._grpc_client import grpc_error_to_modal_exception

    made = grpc_error_to_modal_exception(GRPCError(getattr(Status, status_name), message))
    assert isinstance(made, cls)
    return made


def test_sdk_errors_become_typed_errors_by_their_grpc_status():
    x = modal.exception
    for cls, grpc, status in ((x.ServiceError, "UNAVAILABLE", 503),
                              (x.InternalError, "INTERNAL", 500),
                              (x.ResourceExhaustedError, "RESOURCE_EXHAUSTED", 429),
                              (x.AuthError, "UNAUTHENTICATED", 401),
                              (x.PermissionDeniedError, "PERMISSION_DENIED", 403)):
        error = _sdk_error(cls, grpc)
        typed = translate(error, "call")
        assert isinstance(typed, ProviderHTTPError) and typed.status == status, (error, typed)
        assert is_infrastructure_failure(typed) and is_infrastructure_failure(error)
    assert isinstance(translate(_sdk_error(x.ServiceError, "DEADLINE_EXCEEDED"), "call"),
                      ProviderTimeoutError)
    lost = x.ConnectionError("Could not connect to the Modal server.")
    assert isinstance(translate(lost, "create"), ProviderConnectionError)
    assert is_infrastructure_failure(lost)
    # a sandbox that is gone: expired at the end of its lifetime, evicted before it
    gone = _sdk_error(x.NotFoundError, "NOT_FOUND", "Task ta-1 not found")
    assert not is_infrastructure_failure(gone)
    assert isinstance(translate(gone, "run", "sb-1", ends_at=100.0, now=50.0),
                      SandboxEvictedError)
    assert isinstance(translate(gone, "run", "sb-1", ends_at=100.0, now=100.0),
                      SandboxExpiredError)
    finished = _sdk_error(x.ConflictError, "FAILED_PRECONDITION", "Sandbox already finished")
    assert isinstance(translate(finished, "run", "sb-1"), SandboxEvictedError)
    assert isinstance(translate(x.SandboxTimeoutError("timed out"), "wait", "sb-1"),
                      SandboxExpiredError)


# -- the provider on the server ---------------------------------------------------------------


def test_sandboxes_are_offline_with_a_lifetime_reused_and_terminated_on_close(server):
    provider = ModalProvider(**options(server, call_timeout=5.0, lifetime=600, memory_mb=1536))
    client = DeepGym(provider=provider, backend="threads")
    try:
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        assert client.run(ENV, WRONG).score == 0.0
        (sid,) = provider.live_sandboxes()  # both runs in one sandbox, proven clean between
        box = server.boxes[sid]
        assert box.network is False and box.memory_mb == 1536
        assert box.tags == {"deepgym": "judge", "deepgym_instance": provider.instance}
        assert 580 < box.end_at - time.monotonic() <= 600  # a crashed actor's ends by itself
        # an environment with a long timeout gets sandboxes that live long enough for it
        slow_env = type(ENV).model_validate({**ENV.model_dump(), "timeout": 120.0})
        assert provider._spec(slow_env)[1] >= 8 * 120
    finally:
        client.close()
        provider.close()
    assert sid not in server.live_sandboxes()


def test_input_larger_than_one_stdin_message_goes_in_several(server, provider, monkeypatch):
    """The judge's files (and a run's spec too large for its command's environment) over one
    stdin message go in several, the end of input with the last: judged as always."""
    import deepgym_ray.sandboxes.modal as modal_provider

    monkeypatch.setattr(modal_provider, "STDIN_CHUNK", 4096)
    client = DeepGym(provider=provider, backend="threads")
    assert [client.run(ENV, a).score for a in (ENV.reference_solution, WRONG, LARGE)] \
        == [1.0, 0.0, 1.0]


# A right answer whose spec is over a Modal secret's value (32,768 characters) and far below
# E2B's limit for a variable: it goes on the command's stdin.
MEDIUM = ENV.reference_solution + "\n# " + "x" * 33_000 + "\n"
# A verifier that floods its stderr and then ends the runner where it cannot report.
FLOODER = Environment(name="stderr-flood", timeout=20, case_timeout=5, verifier_code=(
    "import os, threading\n"
    "def verify(solution_path, test_cases_path=None):\n"
    "    def end():\n"
    "        os.write(2, b'x' * (1 << 20) + b'\\nthe last words\\n')\n"
    "        os._exit(2)\n"
    "    threading.Thread(target=end).start()\n"
    "    threading.Event().wait()\n"))


def test_a_run_is_two_calls_its_spec_in_the_environment_its_output_one_stream(server, provider):
    """A run's spec rides on its command and its output is its stdout alone, its exit status
    never asked for: with every stdin write and exit status call refused, a warm sandbox's
    runs are judged. A spec over a secret's value goes on stdin (and fails with it).
    The runner's stderr still comes (after the end of stdout), its tail, however much the
    verifier wrote there."""
    client = DeepGym(provider=provider, backend="threads")
    assert client.run(ENV, ENV.reference_solution).score == 1.0  # the judge's files go in
    refused = [server.faults.add(call, "status", status=403, times=None)
               for call in ("stdin", "exec_wait")]
    assert [client.run(ENV, a).score for a in (ENV.reference_solution, WRONG)] == [1.0, 0.0]
    flooded = client.run_safe(FLOODER, ENV.reference_solution)
    assert flooded.error_type == "verifier_error" and not flooded.has_verdict, flooded
    assert flooded.details.endswith("the last words"), flooded.details[-300:]
    assert [rule.hits for rule in refused] == [0, 0]
    medium = client.run_safe(ENV, MEDIUM)
    assert not medium.has_verdict and "HTTP 403" in medium.details, medium
    server.faults.clear()
    assert client.run(ENV, MEDIUM).score == 1.0


def test_a_sandbox_past_half_its_lifetime_is_not_reused(server, provider):
    client = DeepGym(provider=provider, backend="threads")
    try:
        assert client.run(FAULT_ENV, ENV.reference_solution).score == 1.0
        (first,) = provider.live_sandboxes()
        remote = provider._remotes[first]
        remote.ends_at = time.monotonic() + remote.key[1] / 2 - 1  # as if it had idled long
        assert client.run(FAULT_ENV, ENV.reference_solution).score == 1.0
        assert first not in provider.live_sandboxes()
        deadline = time.monotonic() + 30
        while first in server.live_sandboxes():  # terminated, not left to its lifetime
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        client.close()


def _while_running(provider, server, answer, act):
    """``answer``'s result, ``act(sid)`` done once its program runs in a sandbox of
    ``provider``'s (the judge's upload, then the program, started; and half a second for the
    program to start the run)."""
    def running(server):
        found = next((box.id for box in list(server.boxes.values()) if len(box.execs) >= 2 and
                      box.tags.get("deepgym_instance") == provider.instance), None)
        if found is not None:
            time.sleep(0.5)
        return found
    return remote_setup.result_while_running(provider, server, answer, running, act)


def test_a_sandbox_that_reaches_its_lifetime_mid_run_is_expired(server, provider):
    def expire(sid):
        provider._remotes[sid].ends_at = time.monotonic()
        server.boxes[sid].end_at = time.monotonic()

    result = _while_running(provider, server, SLEEPER, expire)
    assert not result.has_verdict and "SandboxExpiredError" in result.details, result


def test_a_sandbox_terminated_mid_run_before_its_lifetime_is_evicted(server, provider):
    result = _while_running(provider, server, SLEEPER, server.kill)
    assert not result.has_verdict and "SandboxEvictedError" in result.details, result


# -- scoring through the pool -----------------------------------------------------------------


@pytest.mark.slow
def test_every_builtin_reference_scores_one_and_a_wrong_answer_zero(pool_client, server):
    remote_setup.check_every_builtin(pool_client)


# Modal's client retries what its server calls transient (UNAVAILABLE, INTERNAL, a dropped
# stream) itself, for ten seconds on the router: a fault there is one that lasts (every call)
# until the client gives up. (UNAVAILABLE's 503: the batch below, and the translation above.)
FAULTS = [
    pytest.param(("exec", "status", 500, None), "ProviderHTTPError: HTTP 500", id="500"),
    # a refused router token is asked for again (once) and the call tried again
    pytest.param(("exec", "status", 401, 2), "ProviderHTTPError: HTTP 401", id="401"),
    pytest.param(("exec", "status", 403, 1), "ProviderHTTPError: HTTP 403", id="403"),
    pytest.param(("read", "hang", 0, 1), "ProviderTimeoutError", id="hung-call"),
    pytest.param(("read", "drop", 0, None), "ProviderConnectionError", id="dropped-stream"),
    pytest.param(("exec", "vanish", 0, 1), "SandboxEvictedError", id="sandbox-vanishes"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "expected"), FAULTS)
def test_each_fault_gives_no_verdict_with_its_error(pool_client, server, fault, expected):
    call, action, status, times = fault
    remote_setup.check_fault(pool_client, server, call, action, status, expected, times=times)


@pytest.mark.slow
def test_a_batch_with_faults_sprinkled_in_gets_one_verdict_per_input(pool_client, server):
    remote_setup.check_sprinkled_faults(pool_client, server, [
        ("exec", "status", 503, None, 0.15), ("create", "status", 429, 3, 1.0),
        ("read", "drop", 0, 2, 1.0), ("read", "hang", 0, 1, 1.0),
        ("exec", "vanish", 0, 1, 1.0)])


def test_a_failed_create_has_no_verdict_and_a_throttled_one_waits_and_then_judges(server):
    server.faults.add("create", "status", status=400, times=1)
    provider = ModalProvider(**options(server, call_timeout=5.0, throttle_wait=60))
    client = DeepGym(provider=provider, backend="threads")
    try:
        failed = client.run_safe(ENV, ENV.reference_solution)
        assert not failed.has_verdict and "InvalidError" in failed.details, failed
        server.faults.clear()
        throttled = server.faults.add("create", "status", status=429, times=2)
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        assert throttled.hits == 2
    finally:
        client.close()
        provider.close()


# -- configuration and the command line -------------------------------------------------------


def test_the_modal_config_file_is_valid():
    config = DeepGymConfig.from_yaml("configs/modal.yaml")
    assert config.mode == "modal" and config.pool.num_cpus_per_actor < 1
    assert ModalOptions(**config.provider_options).lifetime >= 60
    with pytest.raises(ValueError, match="no_such_option"):
        ModalOptions(no_such_option=1)
    with pytest.raises(ValueError, match="app_name"):
        ModalOptions(app_name="no spaces")


def test_cli_mode_modal_runs(server, monkeypatch, capsys, tmp_path):
    from deepgym_ray.cli import main

    answer = tmp_path / "answer.py"
    answer.write_text(ENV.reference_solution)
    for name, value in server.environ().items():
        monkeypatch.setenv(name, value)
    assert main(["run", "coin_change", str(answer), "--mode", "modal"]) == 0
    assert "coin_change: PASS score=1.0000" in capsys.readouterr().out
