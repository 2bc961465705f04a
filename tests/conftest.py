"""Shared fixtures. One local Ray instance serves the whole test run (a start costs seconds)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid

import pytest
from helpers.ray_cluster import QUIET_RAY, start_local_ray

# Nothing is ever fetched from a hub, and Ray stays on the loopback interface: with this switch
# off, Ray keeps 127.0.0.1 instead of rewriting it to the machine's routable address, so every
# Ray process of the test run (and of the drivers it starts as subprocesses) listens on
# 127.0.0.1 only. Set before anything imports Ray, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_NODE_IP_ADDRESS", "127.0.0.1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# A Ray instance starts one idle worker per CPU for its first driver, and each idles at
# 1-2 % of a core: with a Ray instance per xdist worker all session (and more in the e2e
# tests) that was half a minute of the suite's CPU. Actors start workers of their own anyway.
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
for _name, _value in QUIET_RAY.items():  # (see helpers/ray_cluster.py)
    os.environ.setdefault(_name, _value)
# Modal's client reads the developer's ~/.modal.toml (token, server) when it is imported, and
# goes through a proxy the environment names: the tests' Modal is tests/modal_server only.
os.environ.setdefault("MODAL_CONFIG_PATH", os.path.join(tempfile.gettempdir(),
                                                        "deepgym-tests-no-modal.toml"))
os.environ.setdefault("MODAL_DISABLE_API_PROXY", "1")
# Ray Serve's controller kills a proxy that is not ready within 5 s or misses three 10 s health
# checks, then starts another: on a machine whose cores are all busy (scripts/stress_tests.sh)
# a proxy took longer, and the serve tests failed with the proxy "killed by ray.kill". Every
# Ray process of the test run inherits these.
os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "120")
os.environ.setdefault("RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S", "60")

# Every pytest process (each xdist worker) has a Ray temp dir of its own. A
# ray.cluster_utils.Cluster records its head's address in the temp dir (ray_current_cluster),
# and a client with backend "auto" joins a recorded cluster that answers: with one shared
# /tmp/ray, a test on one worker joined the other worker's three-node cluster, and when that
# cluster was shut down Ray ended the joined worker process a minute later ("Failed to connect
# to GCS within 60 seconds"), taking the test run with it. Short: Ray puts sockets in it.
# The controller makes their parent, and removes it once the workers are gone (a Ray process
# still leaving as its worker ends can write in its own dir after the worker removed it).
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["DEEPGYM_TEST_RAY_DIRS"] = tempfile.mkdtemp(prefix="dgr-", dir="/tmp")
RAY_TEMP_DIR = os.path.join(os.environ["DEEPGYM_TEST_RAY_DIRS"],
                            os.environ.get("PYTEST_XDIST_WORKER", "main"))
os.makedirs(RAY_TEMP_DIR, exist_ok=True)
os.environ["RAY_TMPDIR"] = RAY_TEMP_DIR

# Tests stop the CLIs they start (and this process) with SIGINT, as Ctrl-C would. A shell starts
# a background job (`cmd &` in a script, so `nohup scripts/stress_tests.sh &`) with SIGINT
# ignored, and an ignored signal stays ignored across exec: every CLI the tests started would
# finish its work instead of stopping. Python's own Ctrl-C handler goes back in its place; a
# handled signal is reset to its default at exec, so the children get Ctrl-C's default too.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The quick tier (`pytest -m "not slow"`): every module's fast tests, for every commit. Slow
# are the real-component folders (e2e, the security battery, infrastructure faults), anything
# marked e2e, and the tests marked slow in place (each took more than 2 s in a full run).
_SLOW_FOLDERS = ("e2e", "security", "faults")


def pytest_unconfigure(config):
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    # A Ray process that is still leaving (a metrics agent) can write its session file just
    # after the first removal: look again, briefly.
    for _ in range(5):
        shutil.rmtree(os.environ["DEEPGYM_TEST_RAY_DIRS"], ignore_errors=True)
        if not os.path.exists(os.environ["DEEPGYM_TEST_RAY_DIRS"]):
            return
        time.sleep(0.5)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    # xdist's groups are asked for: on the controller, `--dist loadgroup`; in a worker (whose
    # `dist` xdist resets to "no"), its `loadgroup` option
    grouped = config.getoption("dist", "no") == "loadgroup" \
        or getattr(config.option, "loadgroup", False)
    for item in items:
        parts = item.path.relative_to(config.rootpath).parts
        if (len(parts) > 2 and parts[0] == "tests" and parts[1] in _SLOW_FOLDERS) \
                or item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
        if grouped:
            item.add_marker(pytest.mark.xdist_group(worker_group(item)))
    if grouped:
        _longest_groups_first(items)


# Rough seconds per test, to hand out the longest groups first: xdist's own order (most tests
# first) left the one-test end-to-end modules (a GRPO run, verl's start, each 40 s) for last,
# and one worker ran them alone while the other had nothing left to do.
_ESTIMATE = {"e2e": 20.0, "slow": 5.0, "fast": 0.12}


def _longest_groups_first(items) -> None:
    """Order ``items`` by their group's estimated time, longest first (xdist is then told to
    keep that order: ``--no-loadscope-reorder``); within a group the order stays as it was."""
    def group(item):
        return item.get_closest_marker("xdist_group").args[0]

    def estimate(item):
        if item.get_closest_marker("e2e") is not None or \
                item.path.parent.name in ("e2e", "faults"):
            return _ESTIMATE["e2e"]
        return _ESTIMATE["slow" if item.get_closest_marker("slow") else "fast"]

    totals: dict[str, float] = {}
    for item in items:
        totals[group(item)] = totals.get(group(item), 0.0) + estimate(item)
    items.sort(key=lambda item: -totals[group(item)])


# Under pytest-xdist with `--dist loadgroup` (more cores than this 2-core machine): each worker
# takes whole groups, one test after another. A machine-wide resource that a test breaks or
# takes for itself keeps its users in one group: the Docker engine, which
# tests/e2e/test_docker_outage.py stops and starts again. Every other test stays with its
# module, so that its module's fixtures (a service, a pool) start once, not once per worker,
# and the security battery's attacks stay with their provider's session-wide battery.
_MENTIONS_DOCKER: dict[str, bool] = {}
# The modules that start whole Ray instances of their own (a `ray start` head, a command's
# embedded Ray, a 3-node Cluster): one such start is a dozen processes busy at once, and with
# both cores kept busy three starting together (one per worker) ran past Ray's own fixed 30 s
# for a node to register, twice in a row (stress series 10). They take turns.
OWN_RAY = ("tests/e2e/test_verl_trainer_start.py", "tests/e2e/test_ray_job.py",
           "tests/faults/test_driver_killed_resume.py", "tests/e2e/test_eval_signals.py",
           "tests/e2e/test_pool_cluster.py", "tests/faults/test_node_removed.py")


def worker_group(item) -> str:
    """The xdist group of ``item``: for an attack of the security battery, its provider's
    ("docker-engine" for Docker's); "own-ray" for the modules that start Ray instances of their
    own; "docker-engine" for anything else that may touch the engine (named so, using a docker
    fixture, or a module that mentions it); "session-attacks" for the session attacks on the
    other providers (their pools start once, on one worker, and end with the group: see
    tests/security/conftest.py); else its module."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("battery") if callspec is not None else None
    if case is not None:  # the security battery: one provider's client and pool per worker
        return "docker-engine" if case.mode == "docker" else f"security-{case.label}"
    module = str(item.path)
    if module.endswith(OWN_RAY):
        return "own-ray"
    function = getattr(item, "function", None)
    if getattr(function, "session_attack", False) and "docker" not in item.nodeid.lower():
        return "session-attacks"
    if module not in _MENTIONS_DOCKER:
        _MENTIONS_DOCKER[module] = "docker" in item.path.read_text().lower()
    if _MENTIONS_DOCKER[module] or "docker" in item.nodeid.lower() \
            or any("docker" in name for name in item.fixturenames):
        return "docker-engine"
    return item.nodeid.split("::")[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skip is a failure: .ci/run installs and starts everything the tests need, so
    a test that skips there means a component went missing, not that it may be left out."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, where nothing may skip: {reason}"


@pytest.fixture
def ray_temp_dir():
    """A temp dir of its own for a Ray a subprocess starts (see helpers.cli.ray_temp_dir)."""
    from helpers.cli import ray_temp_dir

    with ray_temp_dir() as path:
        yield path


@pytest.fixture(scope="session")
def local_client():
    """One in-process client on the local sandbox for the whole run (its fork server and
    solution zygote stay warm across test modules)."""
    from deepgym_ray.client import DeepGym

    client = DeepGym(mode="local", backend="threads")
    yield client
    client.close()


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray instance on 127.0.0.1 with no dashboard, shut down after the run."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        start_local_ray()
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def scripted_pool(ray_local, tmp_path_factory):
    """Makes clients on one Ray pool of two actors on the scripted test provider
    (tests/helpers/pool_providers.py), for the tests that only score through a pool.

    Every actor is a new Ray worker process, and Ray starts its workers at nice 15: with every
    core kept busy by another process (scripts/stress_tests.sh) one took half a minute to
    start, so a pool per test cost the suite minutes. Each call gives a new client (its own
    reward-function groups, so no test takes another's scoring) on the same actors; a test
    counts its runs as a difference of the pool's stats.
    """
    from helpers.pool_providers import make_client

    from deepgym_ray.config import PoolConfig
    from deepgym_ray.pool import get_pool

    marker_dir = tmp_path_factory.mktemp("scripted-pool")
    config = PoolConfig(name=f"scripted-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=4,
                        num_cpus_per_actor=0, max_retries=1)

    def make():
        return make_client(marker_dir, pool=config, backend="ray")

    try:
        yield make
    finally:
        get_pool(make()).shutdown()


@pytest.fixture(scope="session")
def docker_client():
    """A client in docker mode (on threads, warm containers kept for the run) on the locally
    built image; skips with the reason when the engine or the image is missing."""
    from helpers.docker_engine import docker_skip_reason, make_docker_client

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    client = make_docker_client(backend="threads")
    yield client
    client.close()


@pytest.fixture(scope="session")
def daytona_server():
    """A local server speaking Daytona's API (tests/daytona_server) on 127.0.0.1, for the real
    ``daytona`` SDK, its sandboxes as Daytona's default images make them: their user is
    ``daytona`` (a uid of its own, home /home/daytona) with passwordless real sudo, commands
    and uploads run as that user (where this machine cannot contain sandboxes or give a user
    sudo: home directories here, as this user). It has ``provider_options()``, ``api_key``,
    ``url`` and ``faults``."""
    pytest.importorskip("daytona")
    from daytona_server import DaytonaTestServer

    server = DaytonaTestServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def daytona_root_server():
    """The local Daytona server whose sandboxes' user is root (an image whose user is root)."""
    pytest.importorskip("daytona")
    from daytona_server import DaytonaTestServer

    server = DaytonaTestServer(user="root").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def e2b_server():
    """A local server speaking E2B's API (tests/e2b_server) on 127.0.0.1, for the real ``e2b``
    SDK: ``environ()`` gives E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL for it; ``faults``
    as the Daytona server's."""
    pytest.importorskip("e2b")
    from daytona_server import container
    from daytona_server.users import sudo_missing

    why = container.available() or sudo_missing()
    if why:
        pytest.skip(f"the E2B test server's sandboxes (containers whose user has sudo) cannot "
                    f"run here: {why}")
    from e2b_server import E2BTestServer

    server = E2BTestServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def modal_server():
    """A local server speaking Modal's gRPC API (tests/modal_server) on 127.0.0.1, for the real
    ``modal`` client: ``provider_options()`` and ``environ()`` point the provider there;
    ``faults`` as the Daytona server's."""
    pytest.importorskip("modal")
    from daytona_server import container

    why = container.available()
    if why:
        pytest.skip(f"the Modal test server's sandboxes (containers) cannot run here: {why}")
    from modal_server import ModalTestServer

    server = ModalTestServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def daytona_client(daytona_server):
    """A client in daytona mode (on threads) on the test server, for the tests that run every
    provider (the agent's sessions)."""
    from deepgym_ray.client import DeepGym

    client = DeepGym(mode="daytona", backend="threads", **daytona_server.provider_options())
    yield client
    client.close()


@pytest.fixture(scope="session")
def repo_pool(ray_local):
    """A Docker client on a Ray pool of its own (2 actors), for repository tasks through the
    pool: the e2e tests and the repository-task attacks' batches share it."""
    from helpers.docker_engine import docker_skip_reason, make_docker_client, shutdown_pool

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    client = make_docker_client(actors=2, concurrency=2, max_retries=1)
    yield client
    shutdown_pool(client)
    client.close()
