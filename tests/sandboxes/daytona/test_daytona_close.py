"""Daytona: ``close()`` returns only once every sandbox the client made is deleted (issue 32,
point 6; issue 39): also one the provider discarded during the batch, whose deletion runs on a
background thread (one such sandbox was seen never deleted). The real ``daytona`` SDK against
the local test server (tests/daytona_server); faults are injected by the server."""

from __future__ import annotations

import uuid

import pytest
from helpers.remote_setup import ENV, options

from deepgym_ray.client import DeepGym
from deepgym_ray.config import DeepGymConfig, PoolConfig
from deepgym_ray.exceptions import SandboxError

pytest.importorskip("daytona")


@pytest.fixture
def server(daytona_server):
    daytona_server.faults.clear()
    yield daytona_server
    daytona_server.faults.clear()

# A hung deletion is given up after its call's bound; a short one keeps these tests short, but
# under load (scripts/stress_tests.sh) an upload took over 2 s (the sudo probe, which took
# over 6 s, is bounded by the create timeout).
CALL_TIMEOUT = 6.0


def _labelled(server, instance: str) -> list[str]:
    """The server's live sandboxes made by the provider ``instance`` (its label)."""
    with server.lock:
        return sorted(box.id for box in server.boxes.values()
                      if (box.request.labels or {}).get("deepgym.instance") == instance)


@pytest.mark.slow
def test_a_sandbox_discarded_in_the_background_is_deleted_before_close_returns(server):
    """The run fails, so its sandbox is discarded and deleted on a thread of its own; that
    deletion hangs. close() waits for it, tries again once it failed, and returns with
    nothing of the client's left on the server."""
    client = DeepGym(mode="daytona", backend="threads",
                     **options(server, call_timeout=CALL_TIMEOUT))
    provider = client.provider
    try:
        assert client.run(ENV, ENV.reference_solution).score == 1.0  # a sandbox, kept
        server.faults.add("execute", "status", status=500)  # its next run's call
        server.faults.add("delete", "hang")
        result = client.run_safe(ENV, ENV.reference_solution)
        assert not result.has_verdict and "HTTP 500" in (result.details or ""), result
        assert provider.live_sandboxes() == []  # discarded: no longer the provider's ...
        assert _labelled(server, provider.instance)  # ... but not deleted yet (the call hangs)
    finally:
        client.close()
    assert _labelled(server, provider.instance) == []


def test_a_sandbox_that_could_not_be_readied_is_deleted_before_close_returns(server):
    """A sandbox made whose readying failed (its home not found) is deleted in the
    background; that deletion fails once, and close() tries again: nothing of the client's
    is left (before, the one try was made in the run's thread, and its failure left the
    sandbox to its auto-delete)."""
    client = DeepGym(mode="daytona", backend="threads",
                     **options(server, call_timeout=CALL_TIMEOUT))
    provider = client.provider
    server.faults.add("home_dir", "status", status=500, times=None)
    deletion = server.faults.add("delete", "status", status=500)
    try:
        result = client.run_safe(ENV, ENV.reference_solution)
        assert not result.has_verdict and "HTTP 500" in (result.details or ""), result
    finally:
        client.close()
        server.faults.clear()
    assert deletion.hits == 1
    assert _labelled(server, provider.instance) == []


def test_close_names_the_sandboxes_it_could_not_delete(server):
    client = DeepGym(mode="daytona", backend="threads",
                     **options(server, call_timeout=CALL_TIMEOUT))
    provider = client.provider
    assert client.run(ENV, ENV.reference_solution).score == 1.0
    [kept] = _labelled(server, provider.instance)  # kept for the next run
    server.faults.add("delete", "status", status=500, times=None)
    try:
        with pytest.raises(SandboxError) as caught:
            client.close()
        assert kept in str(caught.value) and "500" in str(caught.value), caught.value
    finally:
        server.faults.clear()
        server.vanish(kept)


@pytest.mark.slow
def test_closing_a_pool_client_deletes_its_actors_sandboxes(server, ray_local):
    """On the Ray pool this process started: the client's close stops the pool, each actor
    closes its provider first, and the discarded sandbox whose deletion hung is deleted too."""
    before = set(server.live_sandboxes())
    pool = PoolConfig(name=f"daytona-close-{uuid.uuid4().hex[:8]}", actors=1,
                      actor_concurrency=4, num_cpus_per_actor=0.1)
    config = DeepGymConfig(mode="daytona", pool=pool, max_parallel=4,
                           provider_options=options(server, call_timeout=CALL_TIMEOUT))
    client = DeepGym(config=config)
    server.faults.add("execute", "status", status=500)
    server.faults.add("delete", "hang")
    try:
        batch = client.run_batch(ENV, [ENV.reference_solution] * 4)
        assert len(batch.results) == 4
        made = set(server.live_sandboxes()) - before
        assert made
    finally:
        client.close()
    assert not set(server.live_sandboxes()) & made
