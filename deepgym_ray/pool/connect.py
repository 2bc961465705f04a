"""Joining a running Ray cluster, or starting the embedded local one, on first use.

The pool calls :func:`ensure_ray` before it touches Ray, so nothing starts at import time.
With ``RAY_ADDRESS`` set (as ``ray job submit`` does) or a cluster started by ``ray start`` on
this machine, it joins that cluster; otherwise it starts a local instance bound to 127.0.0.1
with no dashboard.

Joining fails fast and says why: an address where nothing answers within
``DEEPGYM_RAY_CONNECT_TIMEOUT`` seconds (default 30) raises :class:`ClusterConnectionError`
naming the address, instead of waiting in ``ray.init`` for many minutes; a cluster that wants
Ray's token authentication raises one naming ``RAY_AUTH_MODE`` and the token file.

Example:
    from deepgym_ray.pool.connect import ensure_ray
    ensure_ray().is_initialized()
    # True
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from deepgym_ray.exceptions import DeepGymError
from deepgym_ray.judge.deepgym_proc import parent_of

__all__ = ["ClusterConnectionError", "auto_backend", "cluster_address", "ensure_ray",
           "running_cluster", "started_here"]

logger = logging.getLogger(__name__)

_init_lock = threading.Lock()
CONNECT_TIMEOUT = 30.0  # seconds an address may stay silent before we give up on it
_AUTH_WORDS = ("authenticat", "auth token", "auth_token", "unauthenticated", "invalidauthtoken")


class ClusterConnectionError(DeepGymError):
    """No Ray cluster could be joined at the address given (or recorded by ``ray start``)."""


def cluster_address(address: str | None = None) -> str | None:
    """The address of the running cluster to join, or None when there is none.

    Looks at ``address``, then ``RAY_ADDRESS``, then the cluster a ``ray start`` on this
    machine recorded. Starts nothing and connects to nothing.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address and address.startswith("ray://"):
        return address  # Ray Client: ray.init handles it, nothing to look up
    if address is None:
        # The record, read as Ray reads it, without Ray's scan of the machine's running
        # instances: that scan warned "Found multiple active Ray instances ... Connecting to
        # latest cluster" about other people's embedded Rays, before we found it gone.
        try:
            with open(_recorded_address_file()) as record:
                return record.read().strip() or None
        except OSError:
            return None
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # pragma: no cover - a Ray without the helper: let ray.init decide
        return address
    return canonicalize_bootstrap_address(address)


def _recorded_address_file() -> str:
    """Where ``ray start`` records its cluster's address on this machine (Ray's own rule, in
    ``ray._common.utils``): looked at here without importing Ray, which costs 0.5 to 2 s."""
    temp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(temp, "ray", "ray_current_cluster")


def running_cluster() -> str | None:
    """The address of a cluster to join: ``RAY_ADDRESS`` as given (joining checks it), or
    the one a ``ray start`` on this machine recorded if it answers now; None otherwise.
    Imports Ray only when there is an address to look at."""
    explicit = os.environ.get("RAY_ADDRESS") or None
    if explicit is None and not os.path.exists(_recorded_address_file()):
        return None
    target = cluster_address()
    if target is None or explicit is not None:
        return target
    return target if _answers(target, 1.0) else None


def auto_backend() -> str:
    """What ``backend="auto"`` means: ``"ray"`` when this process is on Ray already or a
    cluster is running (:func:`running_cluster`), else ``"threads"``. Imports nothing new."""
    ray = sys.modules.get("ray")  # (not imported to ask: an import costs a second)
    if ray is not None and ray.is_initialized():
        return "ray"
    return "ray" if running_cluster() is not None else "threads"


def _answers(address: str, timeout: float) -> bool:
    """True when something accepts a connection at ``address`` now (one attempt: a recorded
    cluster that refuses is gone, and waiting would only delay the local fallback)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return True  # not host:port (e.g. a Ray Client URL): ray.init reports it
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


# What ray.init says on every start, by the logger that says it. Useful once to someone reading
# logs, noise on a console (where it lands inside the progress bar): passed on to our own logger
# at INFO (-v shows it), not printed by Ray's handler.
_RAY_START_CHATTER = {
    "ray._private.authentication.authentication_token_setup": "Token authentication is",
    "ray._private.worker": ("Started a local Ray instance", "Connected to Ray cluster",
                            "Connecting to existing Ray cluster"),
}


class _ToOurLog(logging.Filter):
    def __init__(self, prefixes: str | tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(self.prefixes):
            return True
        logger.info("ray: %s", message)
        return False


@contextlib.contextmanager
def _ray_start_chatter_to_our_log() -> Iterator[None]:
    filters = [(logging.getLogger(name), _ToOurLog(prefixes))
               for name, prefixes in _RAY_START_CHATTER.items()]
    for ray_logger, chatter in filters:
        ray_logger.addFilter(chatter)
    try:
        yield
    finally:
        for ray_logger, chatter in filters:
            ray_logger.removeFilter(chatter)


def _check_reachable(address: str, timeout: float) -> None:
    """Raise ClusterConnectionError unless something accepts connections at ``address``."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # not host:port (e.g. a Ray Client URL): ray.init reports it
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(5.0, timeout)):
                return
        except OSError as exc:
            last = exc
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    source = "RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else "the cluster `ray start` recorded"
    raise ClusterConnectionError(
        f"no Ray cluster answers at {address} ({source}) after {timeout:.0f}s: {last}. "
        "Check that the head node is up (`ray status`), or unset RAY_ADDRESS to run on an "
        "embedded local instance.")


_TOKEN_HELP = ("Set RAY_AUTH_MODE=token and give the cluster's token (the file "
               "~/.ray/auth_token, or RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH).")


def _auth_hint(exc: BaseException, address: str | None = None) -> ClusterConnectionError | None:
    """The error for a join that failed, with the token hint, or None. Ray's core logs
    ``InvalidAuthToken`` and then raises only a generic "Failed to connect", so any failed
    join at ``address`` names token authentication as a likely cause."""
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(word in text for word in _AUTH_WORDS):
        return ClusterConnectionError(
            "the Ray cluster refused this process's authentication: it runs with token "
            "authentication. " + _TOKEN_HELP)
    if address is None:
        return None
    return ClusterConnectionError(
        f"could not join the Ray cluster at {address} ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())[:300]}). If the cluster runs with token authentication "
        "(Ray logs InvalidAuthToken), this process lacks its token: " + _TOKEN_HELP)


def _token_refused(address: str, timeout: float = 5.0) -> bool:
    """Whether the cluster's GCS at ``address`` refuses this process's credentials, asked once
    as Ray's own clients ask (its interceptor adds the token when this process has one).
    False whenever that cannot be told: ray.init then has its say."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return False
    try:
        import grpc
        from ray._private.authentication.grpc_authentication_client_interceptor import (
            SyncAuthenticationMetadataClientInterceptor,
        )
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # another Ray version: no early answer
        return False
    try:
        with grpc.insecure_channel(address) as channel:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(grpc.intercept_channel(
                channel, SyncAuthenticationMetadataClientInterceptor()))
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED
    except Exception:  # noqa: BLE001 - a probe that broke says nothing about the token
        return False
    return False


def started_here() -> bool:
    """Whether this process started the Ray instance it is connected to (an embedded one,
    which ends with it), rather than joined a cluster that outlives it. Read from Ray's node
    object (private, long-standing); False when that cannot be read."""
    try:
        import ray

        node = ray._private.worker._global_node
        return bool(ray.is_initialized() and node is not None and node.head)
    except Exception:  # noqa: BLE001 - another Ray version: treat the cluster as joined
        return False


def ensure_ray(address: str | None = None, **init_kwargs: Any):
    """Connect this process to Ray once and return the ``ray`` module.

    ``address`` overrides ``RAY_ADDRESS``. ``init_kwargs`` go to ``ray.init`` when this call
    starts a local instance (for example ``num_cpus``). Safe to call from many threads.
    Raises :class:`ClusterConnectionError` when a cluster to join does not answer.
    A SIGTERM handler of this process's own survives ``ray.init`` (which puts a plain
    ``sys.exit`` in its place): the CLI's ends a command as Ctrl-C does, cleanly.
    """
    import ray

    if ray.is_initialized():
        return ray
    with _init_lock:
        if ray.is_initialized():
            return ray
        main_thread = threading.current_thread() is threading.main_thread()
        own_handler = signal.getsignal(signal.SIGTERM) if main_thread else None
        try:
            _init(ray, address, init_kwargs)
        finally:
            if callable(own_handler):
                signal.signal(signal.SIGTERM, own_handler)
    return ray


def _init(ray: Any, address: str | None, init_kwargs: dict[str, Any]) -> None:
    """Join the cluster to join, or start the local instance (see ensure_ray)."""
    explicit = address or os.environ.get("RAY_ADDRESS") or None
    target = cluster_address(address)
    if target is not None and explicit is None:
        # Recorded by a `ray start` that may have died since: look, do not wait.
        if not _answers(target, 1.0):
            logger.warning("the Ray cluster `ray start` recorded at %s does not answer; "
                           "starting a local one instead", target)
            target = None
    if target is not None:
        if explicit is not None:
            timeout = float(os.environ.get("DEEPGYM_RAY_CONNECT_TIMEOUT", CONNECT_TIMEOUT))
            _check_reachable(target, timeout)
        if _token_refused(target):  # Ray itself would retry for 20 s before saying less
            raise ClusterConnectionError(
                f"the Ray cluster at {target} refused this process's authentication: it runs "
                "with token authentication. " + _TOKEN_HELP)
        logger.info("joining the Ray cluster at %s", target)
        try:
            with _ray_start_chatter_to_our_log():
                ray.init(address=target, ignore_reinit_error=True)
        except Exception as exc:
            hint = _auth_hint(exc, target)
            if hint is None:
                raise
            raise hint from exc
    else:
        logger.info("no Ray cluster found: starting a local one on 127.0.0.1")
        options: dict[str, Any] = {
            # "local" makes Ray start one: without it, ray.init reads the same record of
            # a dead `ray start` cluster and retries it for minutes.
            "address": "local",
            "include_dashboard": False,
            "_node_ip_address": "127.0.0.1",
            "ignore_reinit_error": True,
        }
        options.update(init_kwargs)
        _start_local(ray, options)


# Ray gives a starting node's raylet a fixed 30 s to register with the GCS (not configurable);
# on a machine whose cores are all busy that was seen to run out. A second start, once the
# first one's processes are gone, then found the machine ready (a third is cheap insurance).
# Each try waits a little longer first: a burst of load (other processes starting) passes.
LOCAL_START_TRIES = 3
LOCAL_START_BACKOFF = 5.0  # seconds before the second try, twice that before the third


def _start_local(ray: Any, options: dict[str, Any]) -> None:
    """``ray.init(**options)`` for a local instance, started again once when Ray gave up
    waiting for its own raylet."""
    for attempt in range(1, LOCAL_START_TRIES + 1):
        before = _children(os.getpid())
        try:
            with _ray_start_chatter_to_our_log():
                ray.init(**options)
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == LOCAL_START_TRIES:
                raise
            logger.warning("the local Ray instance did not start in time (%s); starting it "
                           "again", exc)
            ray.shutdown()
            # Ray's shutdown knows nothing of a node that never finished starting: its GCS,
            # raylet and agents would run on beside the next one, loading the machine that
            # was already too busy. Only Ray's own: another thread of this process may have
            # started children of its own meanwhile.
            _kill_trees({pid for pid in _children(os.getpid()) - before if _runs_ray(pid)})
            time.sleep(LOCAL_START_BACKOFF * attempt)


def _parents() -> dict[int, int]:
    """Every live process's parent, from /proc (empty where there is no /proc)."""
    try:
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return {}
    parents = {pid: parent_of(pid) for pid in pids}
    return {pid: parent for pid, parent in parents.items() if parent is not None}


def _children(pid: int) -> set[int]:
    return {child for child, parent in _parents().items() if parent == pid}


def _runs_ray(pid: int) -> bool:
    """Whether ``pid``'s command line names a file of the installed ``ray`` package (Ray
    starts its GCS, raylet and agents from there)."""
    import importlib.util

    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        return False
    package = os.path.dirname(spec.origin).encode()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return package in handle.read()
    except OSError:
        return False


def _kill_trees(roots: set[int], wait: float = 10.0) -> None:
    """SIGKILL ``roots`` (our children) and all their descendants; return once every one of
    them is gone (the roots reaped here), or after ``wait`` seconds."""
    parents, doomed, todo = _parents(), set(), list(roots)
    while todo:
        pid = todo.pop()
        doomed.add(pid)
        todo.extend(child for child, parent in parents.items()
                    if parent == pid and child not in doomed)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while doomed and time.monotonic() < deadline:
        for pid in list(doomed):
            if pid in roots:
                with contextlib.suppress(ChildProcessError):  # else reaped by Ray's Popen
                    if os.waitpid(pid, os.WNOHANG)[0] != pid:
                        continue
            elif _running(pid):  # a killed process takes a moment to exit
                continue
            doomed.discard(pid)
        if doomed:
            time.sleep(0.05)


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
