"""Daytona throttles creation (issue 39): its rate limit answers HTTP 429 with ``Retry-After``,
a full organization quota answers 403 "Total CPU limit exceeded". The provider waits and tries
again (bounded) instead of turning a throttled create into a no-verdict, frees quota held by
its own idle sandboxes, and stops waiting when it is closed. The real ``daytona`` SDK against
a test server of this module's own (tests/daytona_server/limits.py), so that no other test's
sandboxes count against its quota."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.remote_setup import ENV, options

from deepgym_ray.client import DeepGym
from deepgym_ray.exceptions import ProviderHTTPError
from deepgym_ray.sandboxes.throttle import Throttle

pytest.importorskip("daytona")


@pytest.fixture
def server():
    from daytona_server import DaytonaTestServer

    server = DaytonaTestServer().start()
    try:
        yield server
    finally:
        server.stop()


def _client(server, **extra) -> DeepGym:
    return DeepGym(mode="daytona", backend="threads", max_parallel=8,
                   **options(server, call_timeout=10.0, **extra))


@pytest.mark.slow
def test_a_rate_limited_create_waits_for_the_window_and_every_run_gets_its_verdict(server):
    server.limits.create_limit = (2, 2.0)  # two creates per two seconds
    client = _client(server)
    try:
        with ThreadPoolExecutor(5) as pool:  # five runs at once: five sandboxes
            results = list(pool.map(lambda _: client.run_safe(ENV, ENV.reference_solution),
                                    range(5)))
    finally:
        client.close()
    assert server.limits.refused["rate"] >= 1  # the throttle really refused some creates
    assert [(r.has_verdict, r.score) for r in results] == [(True, 1.0)] * 5, \
        [r.details for r in results]


@pytest.mark.slow
def test_a_full_quota_is_freed_of_our_own_idle_sandboxes(server):
    server.limits.cpu_quota = 2
    client = _client(server)
    other = ENV.model_copy(update={"image": "python:3.12-slim"})  # another kind of sandbox
    try:
        with ThreadPoolExecutor(2) as pool:  # two sandboxes of the first kind fill the quota
            first = list(pool.map(lambda _: client.run(ENV, ENV.reference_solution), range(2)))
        assert [r.score for r in first] == [1.0, 1.0]
        assert len(client.provider.live_sandboxes()) == 2  # kept for reuse, holding the quota
        second = client.run_safe(other, ENV.reference_solution)
    finally:
        client.close()
    assert server.limits.refused["quota"] >= 1
    assert second.has_verdict and second.score == 1.0, second.details


def test_a_quota_that_never_frees_ends_in_no_verdict_naming_it(server):
    server.limits.cpu_quota = 0
    client = _client(server, throttle_wait=3.0)
    try:
        result = client.run_safe(ENV, ENV.reference_solution)
    finally:
        client.close()
    assert server.limits.refused["quota"] >= 2  # it waited and tried again before giving up
    assert not result.has_verdict and result.error_type == "sandbox_error"
    assert "HTTP 403" in result.details and "Total CPU limit exceeded" in result.details


def test_closing_the_provider_ends_a_throttled_wait(server):
    server.limits.cpu_quota = 0
    client = _client(server, throttle_wait=600.0)
    done: dict = {}
    runner = threading.Thread(target=lambda: done.update(
        result=client.run_safe(ENV, ENV.reference_solution)))
    runner.start()
    try:
        while server.limits.refused["quota"] == 0 and runner.is_alive():
            runner.join(0.05)  # until its first create was refused: it waits now
    finally:
        client.close()
    runner.join(120)
    assert not runner.is_alive()
    result = done["result"]
    assert not result.has_verdict and "closed" in result.details, result.details


@pytest.mark.parametrize(("headers", "expected"), [
    ({"Retry-After": "7"}, 7.0),
    ({"retry-after": "0.5"}, 0.5),
    ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: at once
    ({"Retry-After": "soon"}, None),
    ({}, None),
])
def test_the_sdks_rate_limit_error_keeps_its_retry_after(headers, expected):
    from daytona.common.errors import DaytonaRateLimitError

    from deepgym_ray.sandboxes.daytona.calls import translate

    error = translate(DaytonaRateLimitError("Too Many Requests", status_code=429,
                                            headers=headers), "create a sandbox")
    assert isinstance(error, ProviderHTTPError) and error.status == 429
    assert error.retry_after == expected
    assert Throttle.reason(error) == "rate"
    assert Throttle.reason(ProviderHTTPError(403, "Forbidden")) is None  # a refused key
    assert Throttle.reason(ProviderHTTPError(403, "Total memory limit exceeded")) == "quota"
