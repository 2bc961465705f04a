"""The Daytona provider: judge runs in managed cloud sandboxes through the ``daytona`` SDK.

Configured by explicit options or ``DAYTONA_API_KEY``, ``DAYTONA_API_URL`` and
``DAYTONA_TARGET`` (see ``options``). Each environment gets sandboxes from its own snapshot or
image (``Environment.image``, else the provider's ``image`` or ``snapshot``) with the
provider's resources, all network blocked, and auto-stop and auto-delete set, so a crashed
actor never leaks a paid sandbox for long. A provider keeps the sandboxes it made and hands
each run one that no other run is using: a fresh work directory per run, the solution under a
fresh uid, and the run's processes proven gone before the sandbox is used again (a sandbox
whose cleanup is not proven, whose runs cannot be root, or that failed is deleted instead).
Sandboxes are recreated when they die, expire or are evicted. One thrown away during a batch
is deleted on a thread of its own; ``close`` deletes the rest and returns only once every
sandbox the provider made is deleted, those threads' too (or raises naming what is left).
A create that Daytona throttles (its rate limit, the organization's quota) waits and tries
again, up to ``throttle_wait`` seconds (see ``sandboxes.throttle``).

How a run is confined inside a sandbox (as root, or through its user's sudo; what happens
without either) and how its secrets travel: docs/internals.md, "The Daytona sandbox".

A run costs two calls: one bulk upload (the run's files and spec; the judge once per sandbox)
and one session command, whose stdout and stderr come back apart (``process.exec`` would mix
them). Every call is bounded by our own deadline (see ``calls``), and every failure is a typed
:class:`~deepgym_ray.exceptions.SandboxError`: no verdict, retried elsewhere by the pool.

Example:
    provider = DaytonaProvider(api_url="http://127.0.0.1:3000/api")
    DeepGym(provider=provider).run(env, answer).score
    # 1.0
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from deepgym_ray.exceptions import (
    ProviderHTTPError,
    RunCancelledError,
    SandboxError,
    SandboxEvictedError,
)
from deepgym_ray.judge import JUDGE_FILES, RUNNER, STEP
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import (
    CancelSignal,
    CommandResult,
    Sandbox,
    SandboxProvider,
    sandbox_path,
)
from deepgym_ray.sandboxes.daytona import command as cmd
from deepgym_ray.sandboxes.daytona import privilege
from deepgym_ray.sandboxes.daytona.calls import bounded, translate
from deepgym_ray.sandboxes.daytona.clients import SdkClients
from deepgym_ray.sandboxes.daytona.handles import Remote, Run
from deepgym_ray.sandboxes.daytona.idle import IdleSandboxes
from deepgym_ray.sandboxes.daytona.options import DaytonaOptions, check_access, load_sdk
from deepgym_ray.sandboxes.teardown import Teardown
from deepgym_ray.sandboxes.throttle import Throttle

__all__ = ["DaytonaOptions", "DaytonaProvider"]

logger = logging.getLogger(__name__)
SESSION = "deepgym"
MB = 1 << 20
# Of a sandbox's memory, what the judge keeps (the runner, the verifier, the in-sandbox
# program); the rest bounds all of a run's solution processes together.
JUDGE_HEADROOM_MB = 256
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


class DaytonaProvider(SandboxProvider):
    """Judge runs in Daytona sandboxes (see the module docstring); options: DaytonaOptions."""

    name = "daytona"
    #: A run mostly waits on the network: the pool gives it many light actors, each with many
    #: runs in flight (see ``deepgym_ray.pool.default_shape``).
    io_bound = True
    python = "python3"
    #: A given-up run stops waiting on Daytona at once; its sandbox is deleted, as after a
    #: call that timed out (that ends the command inside it).
    cancellable = True
    keeps_work = True  # a session's runs keep its work area (see in_sandbox)

    def __init__(self, **options: Any) -> None:
        self.options = DaytonaOptions(**options).resolved()
        self._sdk_clients = SdkClients(self.options)  # a few sandboxes per SDK client
        self._lock = threading.Lock()
        self._idle = IdleSandboxes()
        self._remotes: dict[str, Remote] = {}
        #: This provider's label value, on every sandbox it makes (to find them by).
        self.instance = secrets.token_hex(8)
        self._teardown = Teardown()  # deletions on background threads, creations in flight
        self._closed = False
        self._closing = threading.Event()  # ends a throttled create's wait

    # --- start-up checks -----------------------------------------------------------------

    @classmethod
    def preflight(cls, **options: Any) -> None:
        """Raise SandboxError with one clear line when the SDK is missing, no key is set, or
        the server refuses the key; return quietly when Daytona answers."""
        check_access(DaytonaOptions(**options).resolved())

    def client(self) -> Any:
        """The SDK client, made on first use."""
        return self._sdk_clients.first()

    # --- sandboxes -------------------------------------------------------------------------

    def _spec(self, env: Environment) -> tuple:
        o = self.options
        image = env.image or o.image
        return (image, None if image else o.snapshot, o.cpu, o.memory, o.disk)

    def _acquire(self, env: Environment) -> Remote:
        key = self._spec(env)
        throttle = Throttle(self.options.throttle_wait, self._closing)
        while True:  # a throttled create waits (bounded) and looks for an idle one again
            remote = self._take_idle(key)
            if remote is not None:
                return remote
            try:
                with self._teardown.creating():  # close waits for it
                    return self._create_remote(key)
            except ProviderHTTPError as exc:
                if not throttle.wait(exc, free_room=self._free_idle):
                    raise

    def _take_idle(self, key: tuple) -> Remote | None:
        # Reuse only well inside the auto-stop interval: a stopped sandbox would fail the run.
        fresh_for = self.options.auto_stop_minutes * 60 * 0.8
        while True:
            with self._lock:
                if self._closed:
                    raise SandboxError("the Daytona provider is closed")
                remote, stale = self._idle.pop(key, fresh_for)
            for old in stale:
                self._discard(old, "idle too long")
            if remote is None or self._still_started(remote):
                return remote
            self._discard(remote, "stopped while it was idle")

    def _still_started(self, remote: Remote) -> bool:
        """Whether a sandbox idle for ``state_check_after`` seconds or more is still running
        (something other than its auto-stop may have stopped it: one API call to know)."""
        if time.monotonic() - remote.last_used < self.options.state_check_after:
            return True
        try:
            bounded(remote.sdk.refresh_data, deadline=self.options.call_timeout,
                    what="look at the sandbox", sandbox_id=remote.id)
        except SandboxError:
            return False
        return str(getattr(remote.sdk.state, "value", remote.sdk.state)).lower() == "started"

    def _free_idle(self) -> bool:
        """Delete the longest idle sandbox we keep (it holds quota a new one needs)."""
        with self._lock:
            oldest = self._idle.pop_oldest()
        if oldest is None:
            return False
        self._discard(oldest, "the organization's quota is full")
        return True

    def _create_remote(self, key: tuple) -> Remote:
        sdk, o = load_sdk(), self.options
        image, snapshot, cpu, memory, disk = key
        common = dict(language="python", network_block_all=True,
                      labels={"deepgym": "judge", "deepgym.instance": self.instance},
                      auto_stop_interval=o.auto_stop_minutes,
                      auto_delete_interval=o.auto_delete_minutes)
        if image:
            resources = sdk.Resources(cpu=cpu, memory=memory, disk=disk)
            params = sdk.CreateSandboxFromImageParams(image=image, resources=resources, **common)
        else:
            params = sdk.CreateSandboxFromSnapshotParams(snapshot=snapshot, **common)
        index = self._sdk_clients.take()
        try:
            box = bounded(self._sdk_clients.get(index).create, params, timeout=o.create_timeout,
                          deadline=o.create_timeout + 5, what="create a sandbox")
        except SandboxError:
            self._sdk_clients.release(index)
            raise
        try:
            home = bounded(box.get_user_home_dir, deadline=o.call_timeout,
                           what="find the sandbox's home", sandbox_id=box.id)
            bounded(box.process.create_session, SESSION, request_timeout=o.call_timeout,
                    deadline=o.call_timeout, what="open a session", sandbox_id=box.id)
            user = getattr(box, "user", None)
            root = privilege.RootAccess() if user == "root" else privilege.probe(
                box, o.call_timeout)
        except SandboxError:
            self._sdk_clients.release(index)
            self._delete(box)
            raise
        memory = getattr(box, "memory", None)
        remote = Remote(sdk=box, key=key, home=str(home).rstrip("/"), client_index=index,
                        root=root,
                        memory_mb=int(memory * 1024) if isinstance(memory, (int, float))
                        and memory > 0 else None)
        with self._lock:
            closed = self._closed
            if not closed:
                self._remotes[remote.id] = remote
        if closed:  # close ran while it was made: it is this thread's to delete
            self._sdk_clients.release(index)
            self._delete(box)
            raise SandboxError("the Daytona provider was closed while a sandbox was made")
        if not remote.as_root:
            _warn_once(privilege.weaker_warning(user, root.why_not))
        return remote

    def _delete(self, box: Any) -> str | None:
        """Delete a sandbox: None once it is gone (or was already), else why not (logged;
        ``close`` tries once more, and auto-delete removes it in the end)."""
        try:
            bounded(box.delete, timeout=self.options.call_timeout,
                    deadline=self.options.call_timeout + 5, what="delete a sandbox",
                    sandbox_id=box.id)
        except SandboxEvictedError:  # 404/410: gone already
            return None
        except SandboxError as exc:
            logger.warning("could not delete Daytona sandbox %s: %s", box.id, exc)
            return f"{type(exc).__name__}: {exc}"
        return None

    def _discard(self, remote: Remote, why: str) -> None:
        """Forget ``remote`` and delete it on a thread of its own (``close`` waits for it)."""
        logger.debug("deleting Daytona sandbox %s: %s", remote.id, why)
        with self._lock:
            held = self._remotes.pop(remote.id, None) is not None
        if held:
            self._sdk_clients.release(remote.client_index)
        self._teardown.spawn(remote.id, self._delete, remote.sdk)

    # --- the provider protocol -------------------------------------------------------------

    def create(self, env: Environment) -> Sandbox:
        remote = self._acquire(env)
        run_id = secrets.token_hex(8)
        uid = (1 << 20) + secrets.randbelow(1 << 29) if remote.as_root else None
        run = Run(remote=remote, dir=f"{remote.home}/deepgym/{run_id}", uid=uid)
        return Sandbox(id=f"{remote.id}/{run_id}", provider=self.name, handle=run)

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        run: Run = sandbox.handle
        for name, content in files.items():
            rel = sandbox_path(name)
            run.files[str(rel)] = bytes(content)  # sent with the run: one upload per run

    def solution_launch(self, sandbox: Sandbox) -> dict:
        """The solution runs under the run's uid (when we are root) with resource limits."""
        run: Run = sandbox.handle
        limits = {"as": self.options.solution_memory_mb * MB, "nproc": self.options.max_processes,
                  "fsize": 64 * MB, "nofile": 256, "core": 0}
        return {"launch": {"kind": "plain", "prefix": [], "python": None, "uid": run.uid,
                           "limits": limits},
                "solution_dir": cmd.solution_dir(run.dir),
                "clean_marker": f"{run.dir}/{cmd.CLEAN_MARKER}"}

    def run_memory_mb(self, remote: Remote) -> int:
        """The bound on all of a run's solution processes together in ``remote``."""
        own = self.options.solution_memory_mb
        if remote.memory_mb is None:
            return own
        return max(64, min(own, remote.memory_mb - JUDGE_HEADROOM_MB))

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None,
            cancel: CancelSignal | None = None) -> CommandResult:
        run: Run = sandbox.handle
        remote, o = run.remote, self.options
        sdk = load_sdk()
        argv = list(command)
        if argv[-1:] in ([RUNNER], [STEP]):
            # A session's step: from it on, the sandbox keeps the agent's work between runs.
            run.session = run.session or argv[-1] == STEP
            argv[-1] = f"{remote.judge_dir}/{argv[-1]}"
        # The run's files and the environment's variables (its secrets) travel in one
        # root-only spec file, never on a command line.
        spec = cmd.run_spec(
            files={n: data for n, data in run.files.items() if n not in JUDGE_FILES},
            argv=argv, stdin=stdin, env=env or {}, timeout=timeout, uid=run.uid,
            disk_mb=o.disk_mb, max_files=o.max_files, memory_mb=self.run_memory_mb(remote),
            pids=o.max_processes, path=remote.root.runner_path, keep_work=run.session)
        uploads = [sdk.FileUpload(source=spec, destination=f"{run.dir}/{cmd.SPEC_FILE}")]
        digest = cmd.judge_digest()
        if digest != remote.judge_digest:  # the judge goes once per sandbox
            uploads += [sdk.FileUpload(source=data, destination=f"{remote.judge_dir}/{name}")
                        for name, data in cmd.judge_files()]
        request = sdk.SessionExecuteRequest(command=cmd.session_command(
            remote.judge_dir, run.dir, remote.root.program_prefix()))
        started = time.monotonic()
        try:
            # Both calls on one of our threads (one hand-off per run), each bounded by the
            # SDK's socket timeouts, and the pair by our own deadline: the run's time plus a
            # margin per call for the provider to answer, and then it is the provider that hangs.
            response = bounded(self._upload_and_run, remote, uploads, digest, request, timeout,
                               deadline=timeout + 2 * o.call_timeout,
                               what="upload and run the judge", sandbox_id=remote.id,
                               cancel=cancel)
        except (SandboxError, RunCancelledError):
            run.reusable = False
            raise
        duration = time.monotonic() - started
        stderr = (response.stderr or "").encode("utf-8", "surrogateescape")
        report = cmd.read_report(stderr)
        # A session's sandbox holds the agent's work to the end: deleted then, never reused.
        run.reusable = bool(report and report.get("clean")) and remote.as_root \
            and not run.session
        if report is None or report.get("error"):
            run.reusable = False
            why = report["error"] if report else (
                f"no report (exit code {response.exit_code}): "
                + stderr[-500:].decode("utf-8", "replace").strip())
            raise SandboxError(f"the run's program in the Daytona sandbox failed: {why}",
                               sandbox_id=sandbox.id)
        self._note_confinement(remote, report)
        timed_out = bool(report.get("timed_out"))
        return CommandResult(exit_code=None if timed_out else report.get("exit_code"),
                             stdout=(response.stdout or "").encode("utf-8", "surrogateescape"),
                             stderr=cmd.strip_report(stderr), timed_out=timed_out,
                             duration=duration)

    def _upload_and_run(self, remote: Remote, uploads: list, digest: str, request: Any,
                        timeout: float) -> Any:
        o = self.options
        try:
            remote.sdk.fs.upload_files(uploads, timeout=int(o.call_timeout))
        except BaseException as exc:  # noqa: B036 - typed here, so the step is named
            raise translate(exc, "upload the run's files", remote.id) from exc
        remote.judge_digest = digest
        try:
            return remote.sdk.process.execute_session_command(
                SESSION, request, timeout=int(timeout + o.call_timeout))
        except BaseException as exc:  # noqa: B036
            raise translate(exc, "run the judge", remote.id) from exc

    def _note_confinement(self, remote: Remote, report: Mapping[str, Any]) -> None:
        """Say once (per provider process and message) what confinement a sandbox lacks."""
        if remote.confinement is not None:
            return
        remote.confinement = dict(report.get("held") or {})
        lost = cmd.missing_confinement(report)
        if lost:
            _warn_once("Daytona sandbox confinement is weaker here: " + "; ".join(lost))

    def destroy(self, sandbox: Sandbox) -> None:
        run: Run = sandbox.handle
        remote = run.remote
        remote.runs += 1
        if not (run.reusable and self.options.reuse):
            self._discard(remote, "not proven clean" if run.reusable else "failed or unchecked")
            return
        with self._lock:
            if not self._closed:
                self._idle.put(remote)
                return
        self._discard(remote, "provider closed")

    def close(self) -> None:
        """Delete every sandbox this provider made (in parallel, each call bounded) and return
        once they are deleted: idle or in use, discarded earlier and still being deleted on a
        background thread, or still being made. Raises SandboxError naming those it could
        not delete (their auto-delete interval removes them in the end)."""
        self._closing.set()
        with self._lock:
            self._closed = True
            remotes = list(self._remotes.values())
            self._remotes.clear()
            self._idle.clear()
        for remote in remotes:
            self._teardown.spawn(remote.id, self._delete, remote.sdk)
        o = self.options
        # A creation in flight ends within its own bounds (create, then three calls).
        left = self._teardown.finish(o.create_timeout + 3 * o.call_timeout + 20)
        if left:
            raise SandboxError("the Daytona provider could not delete its sandboxes: " + "; "
                               .join(f"{sid} ({why})" for sid, why in sorted(left.items())))

    def live_sandboxes(self) -> list[str]:
        """The ids of the sandboxes this provider holds (idle or in use)."""
        with self._lock:
            return sorted(self._remotes)
