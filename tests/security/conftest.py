"""Fixtures of the security battery: one Battery (client, pool, host checks) per provider.

Every attack file runs against every provider in ``providers_under_test.PROVIDERS``; a provider
that cannot be built here skips with its reason (a failure under CI, see tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

import pytest
from battery import Battery
from harness import plant_host_canary
from providers_under_test import PROVIDERS

# The attacks whose batch case each provider runs this session: provider label -> attacks.
BATCH_ATTACKS = pytest.StashKey[dict]()

# Before anything starts Ray or a provider: every process they start inherits the canary.
plant_host_canary()


def _fixture_name(case) -> str:
    return "battery_" + case.label.replace("-", "_")


def _provider_battery(case):
    """The session fixture of one provider's Battery. It is not parametrized: pytest keeps one
    instance of a parametrized session fixture at a time and tears it down whenever the order
    of the tests (under xdist, the scheduler's) switches providers; this one lives for the
    session, so each provider's pool starts, and its batch map runs, once. It asks for its
    server first, so that it is closed before the server stops."""

    @pytest.fixture(scope="session", name=_fixture_name(case))
    def provider_battery(request):
        live = case
        if case.server is not None:  # a local server speaking the provider's API
            server = request.getfixturevalue(case.server)
            live = dataclasses.replace(case, options={
                **case.options, **server.provider_options()})
        reason = live.unavailable()
        if reason is not None:
            pytest.skip(f"provider unavailable: {reason}")
        ledger_dir = tempfile.mkdtemp(prefix="deepgym-security-ledger-")
        runner = Battery(live, ledger_dir)
        runner.batch_attacks = request.config.stash.get(BATCH_ATTACKS, {}).get(case.label, [])
        try:
            yield runner
        finally:
            runner.close()
            shutil.rmtree(ledger_dir, ignore_errors=True)

    return provider_battery


for _case in PROVIDERS:
    globals()[_fixture_name(_case)] = _provider_battery(_case)


@pytest.fixture(scope="session", params=PROVIDERS, ids=[case.label for case in PROVIDERS])
def battery(request):
    """The battery's client for one provider, shared by every attack of the session."""
    return request.getfixturevalue(_fixture_name(request.param))


def _battery_case_and_attack(item):
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("battery") if callspec is not None else None
    return case, getattr(getattr(item, "module", None), "ATTACK", None)


BATCH_TIMEOUT = 1200  # seconds, for a test that runs a provider's whole batch


def _session_attack_left_out(item) -> bool:
    """A session attack on a provider that runs only some of them in CI (session_attacks)."""
    from session_attacks import CI_ONLY

    callspec = getattr(item, "callspec", None)
    provider = callspec.params.get("provider") if callspec is not None else None
    wanted = CI_ONLY.get(provider)
    return wanted is not None and item.module.__name__ not in wanted


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    """A provider case that names its ``attacks`` runs only those: the others are deselected
    (not skipped), unless DEEPGYM_FULL_BATTERY=1. Then each provider's batch list is what is
    left of its ``test_in_batch`` tests."""
    keep, drop = [], []
    for item in items:
        case, attack = _battery_case_and_attack(item)
        left_out = (getattr(case, "attacks", None) is not None and attack is not None
                    and attack.name not in case.attacks or _session_attack_left_out(item)) \
            and os.environ.get("DEEPGYM_FULL_BATTERY") != "1"
        (drop if left_out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    batches: dict[str, list] = {}
    for item in items:
        case, attack = _battery_case_and_attack(item)
        if case is not None and attack is not None and item.originalname == "test_in_batch":
            batches.setdefault(case.label, []).append(attack)
            # The first of a provider's batch tests runs the whole provider's map (every
            # attack, four runs each, and the follow-ups): under scripts/stress_tests.sh
            # Docker's took longer than pytest's 300 s.
            item.add_marker(pytest.mark.timeout(BATCH_TIMEOUT))
    config.stash[BATCH_ATTACKS] = batches


@pytest.fixture(autouse=True)
def known_gap(request):
    """An attack listed in its provider's ``known_gaps`` is a strict xfail, with the reason."""
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("battery") if callspec is not None else None
    attack = getattr(request.module, "ATTACK", None)
    if case is not None and attack is not None and attack.name in case.known_gaps:
        request.applymarker(pytest.mark.xfail(
            strict=True, reason=f"known gap of {case.label}: {case.known_gaps[attack.name]}"))


@pytest.fixture
def pool_battery(battery, ray_local):
    """The same battery, with the session's local Ray instance up for its pool."""
    return battery



def _session_pool(name: str, mode: str, **options):
    import uuid

    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig

    config = PoolConfig(name=f"session-attacks-{name}-{uuid.uuid4().hex[:8]}", actors=2,
                        actor_concurrency=2, num_cpus_per_actor=0, max_retries=0)
    return DeepGym(config=DeepGymConfig(mode=mode, backend="ray", pool=config,
                                        provider_options=options))


# The session attacks' pools (a client each on 2 actors of its own), by provider, made when an
# attack first asks and ended when this worker's run of the attacks' group is over (below), not
# at the end of the session: an idle actor costs about 0.5 CPU-s a minute.
_SESSION_POOLS: dict[str, object] = {}


def _session_pool_client(request, mode: str, server_fixture: str | None = None):
    if mode not in _SESSION_POOLS:
        options = {} if server_fixture is None else \
            request.getfixturevalue(server_fixture).provider_options()
        _SESSION_POOLS[mode] = _session_pool(mode, mode, **options)
    return _SESSION_POOLS[mode]


def _end_session_pools() -> None:
    from deepgym_ray.pool import get_pool

    while _SESSION_POOLS:
        _, client = _SESSION_POOLS.popitem()
        get_pool(client).shutdown()
        client.close()


def _group(item) -> str | None:
    marker = None if item is None else item.get_closest_marker("xdist_group")
    return None if marker is None else marker.args[0]


@pytest.hookimpl(tryfirst=True)  # before the servers' session fixtures are torn down
def pytest_runtest_teardown(item, nextitem):
    """Ends the session attacks' pools once the next test is not one of their group (under
    xdist a worker runs a group's tests one after another; with ``-n 0``, at the end)."""
    if _SESSION_POOLS and (nextitem is None or
                           _group(item) is not None and _group(nextitem) != _group(item)):
        _end_session_pools()


@pytest.fixture
def session_pool_local(request, ray_local):
    """A local-sandbox client on a Ray pool of its own (2 actors), for the session attacks'
    batches (session_attacks.py)."""
    return _session_pool_client(request, "local")


@pytest.fixture
def session_pool_daytona(request, ray_local):
    """The same on the Daytona test server (its user is ``daytona``, with sudo)."""
    return _session_pool_client(request, "daytona", "daytona_server")


@pytest.fixture
def session_pool_e2b(request, ray_local):
    """The same on the E2B test server."""
    return _session_pool_client(request, "e2b", "e2b_server")


@pytest.fixture
def session_pool_modal(request, ray_local):
    """The same on the Modal test server."""
    return _session_pool_client(request, "modal", "modal_server")
