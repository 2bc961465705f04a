"""What every sandbox-cloud provider (Daytona, E2B, Modal) shares: :class:`RemoteProvider`.

A remote provider keeps the sandboxes it made and hands each run one that no other run is
using: a fresh work directory per run, the solution under a fresh uid, and the run's
processes proven gone before the sandbox is used again (a sandbox whose cleanup is not
proven, whose runs cannot be root, or that failed is deleted instead). A run is an upload
(the run's spec, see ``command``; the judge's files once per sandbox) and a command, the
in-sandbox program (``in_sandbox``), which confines the run, runs it, cleans up and reports,
made on one of our threads and bounded by our own deadline (``calls``); a cloud whose command
can carry the spec makes it one call (Daytona, E2B, Modal).
A create the cloud throttles waits and tries again (``sandboxes.throttle``). One sandbox
thrown away during a batch is deleted on a thread of its own; ``close`` deletes the rest and
returns only once every sandbox the provider made is deleted (or raises naming what is left).

A cloud is a subclass that says how to make, check, feed and delete one of its sandboxes:
:meth:`~RemoteProvider._open`, :meth:`~RemoteProvider._still_running`,
:meth:`~RemoteProvider._upload`, :meth:`~RemoteProvider._execute`,
:meth:`~RemoteProvider._delete`, and its kind of sandbox (:meth:`~RemoteProvider._spec`).

Example:
    class MyCloudProvider(RemoteProvider):
        name, service = "mycloud", "MyCloud"
        ...
"""

from __future__ import annotations

import logging
import posixpath
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deepgym_ray.exceptions import ProviderHTTPError, RunCancelledError, SandboxError
from deepgym_ray.judge import JUDGE_FILES, RUNNER, STEP
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import (
    CancelSignal,
    CommandResult,
    Sandbox,
    SandboxProvider,
    sandbox_path,
)
from deepgym_ray.sandboxes.remote import command as cmd
from deepgym_ray.sandboxes.remote.calls import Translate, bounded_here
from deepgym_ray.sandboxes.remote.calls import bounded as _bounded
from deepgym_ray.sandboxes.remote.handles import Remote, Run
from deepgym_ray.sandboxes.remote.idle import IdleSandboxes
from deepgym_ray.sandboxes.teardown import Teardown
from deepgym_ray.sandboxes.throttle import Throttle

__all__ = ["Remote", "RemoteProvider", "Run"]

logger = logging.getLogger(__name__)
MB = 1 << 20
_JUDGE_FILES = frozenset(JUDGE_FILES)
# Of a sandbox's memory, what the judge keeps (the runner, the verifier, the in-sandbox
# program); the rest bounds all of a run's solution processes together.
JUDGE_HEADROOM_MB = 256
_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning once per process."""
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


class RemoteProvider(SandboxProvider):
    """Judge runs in a sandbox cloud (see the module docstring). ``options`` is the
    subclass's pydantic settings, with the fields every remote provider has (``call_timeout``,
    ``create_timeout``, ``throttle_wait``, ``reuse``, ``state_check_after``,
    ``solution_memory_mb``, ``max_processes``, ``disk_mb``, ``max_files``)."""

    #: The cloud's name in messages.
    service = "the sandbox cloud"
    #: A run mostly waits on the network: the pool gives it many light actors, each with many
    #: runs in flight (see ``deepgym_ray.pool.default_shape``).
    io_bound = True
    python = "python3"
    #: A given-up run stops waiting at once; its sandbox is deleted, as after a call that
    #: timed out (that ends the command inside it).
    cancellable = True
    keeps_work = True  # a session's runs keep its work area (see in_sandbox)
    #: A run's whole output on the command's stdout, its stderr not read (where each stream
    #: read is a call of its own; see ``command.split_one_stream``).
    one_stream = False
    #: The SDK's calls are futures of its own event loop (Modal's): a run's calls are bounded
    #: on the run's thread (``calls.bounded_here``), with no hop to a daemon thread of ours.
    calls_are_futures = False
    options: Any

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = IdleSandboxes()
        self._remotes: dict[str, Remote] = {}
        #: This provider's label value, on every sandbox it makes (to find them by).
        self.instance = secrets.token_hex(8)
        self._teardown = Teardown()  # deletions on background threads, creations in flight
        self._closed = False
        self._closing = threading.Event()  # ends a throttled create's wait

    # --- what a cloud says -----------------------------------------------------------------

    def translate(self, exc: BaseException, what: str, sandbox_id: str | None = None
                  ) -> SandboxError:
        """The SandboxError for a failed SDK call ``what``."""
        raise NotImplementedError

    def _spec(self, env: Environment) -> tuple:
        """The kind of sandbox ``env`` runs in (sandboxes of one kind serve each other's runs)."""
        raise NotImplementedError

    def _open(self, key: tuple) -> Remote:
        """A new sandbox of kind ``key``, ready for runs; typed SandboxError when it cannot
        be made (and nothing left behind)."""
        raise NotImplementedError

    def _still_running(self, remote: Remote) -> bool:
        """Whether an idle sandbox can take a run (called before each reuse)."""
        raise NotImplementedError

    def _upload(self, remote: Remote, files: list[tuple[str, bytes]]) -> None:
        """Write ``files`` (absolute paths in the sandbox) so root can read them."""
        raise NotImplementedError

    def _execute(self, remote: Remote, command: str, timeout: float,
                 complete: Callable[[str, str], bool]) -> tuple[str, str, Any]:
        """Run the shell ``command`` (the in-sandbox program, as root where the sandbox
        allows) for up to ``timeout`` seconds: its stdout, stderr and exit code, all of them
        (``complete(stdout, stderr)`` says whether they are)."""
        raise NotImplementedError

    def _delete(self, remote: Remote) -> str | None:
        """Delete a sandbox: None once it is gone (or was already), else why not."""
        raise NotImplementedError

    def lifetime_left(self, sandbox_id: str | None) -> tuple[float | None, float]:
        """(where the lifetime of the held sandbox ``sandbox_id`` ends, now), both monotonic
        (None: not held, or no set end): what tells an expired sandbox from an evicted one."""
        with self._lock:
            remote = self._remotes.get(sandbox_id or "")
        return (remote.ends_at if remote else None), time.monotonic()

    def _fresh_for(self) -> float:
        """How long an idle sandbox stays fit for reuse without a look (default: always)."""
        return float("inf")

    # --- calls -----------------------------------------------------------------------------

    def bounded(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` bounded and typed (see ``remote.calls.bounded``)."""
        translate: Translate = self.translate
        return _bounded(fn, *args, translate=translate, service=self.service, **kwargs)

    def _bounded_run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A run's calls, bounded as :meth:`bounded`: on the run's own thread where the SDK's
        calls are futures of its event loop (``calls_are_futures``, see ``calls.wait``)."""
        if not self.calls_are_futures:
            return self.bounded(fn, *args, **kwargs)
        translate: Translate = self.translate
        return bounded_here(fn, *args, translate=translate, service=self.service, **kwargs)

    # --- sandboxes -------------------------------------------------------------------------

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
        while True:
            with self._lock:
                if self._closed:
                    raise SandboxError(f"the {self.service} provider is closed")
                remote, stale = self._idle.pop(key, self._fresh_for())
            for old in stale:
                self._discard(old, "idle too long")
            if remote is None or self._still_running(remote):
                return remote
            self._discard(remote, "stopped while it was idle")

    def _free_idle(self) -> bool:
        """Delete the longest idle sandbox we keep (it holds quota a new one needs)."""
        with self._lock:
            oldest = self._idle.pop_oldest()
        if oldest is None:
            return False
        self._discard(oldest, "the organization's quota is full")
        return True

    def _create_remote(self, key: tuple) -> Remote:
        remote = self._open(key)
        with self._lock:
            closed = self._closed
            if not closed:
                self._remotes[remote.id] = remote
        if closed:  # close ran while it was made: it is this thread's to delete
            self._delete(remote)
            raise SandboxError(f"the {self.service} provider was closed while a sandbox "
                               "was made")
        return remote

    def _discard(self, remote: Remote, why: str) -> None:
        """Forget ``remote`` and delete it on a thread of its own (``close`` waits for it)."""
        logger.debug("deleting %s sandbox %s: %s", self.service, remote.id, why)
        with self._lock:
            self._remotes.pop(remote.id, None)
        self._teardown.spawn(remote.id, self._delete, remote)

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
            if name in _JUDGE_FILES:  # the sandbox has them (they go once per sandbox)
                continue
            run.files[str(sandbox_path(name))] = bytes(content)  # sent with the run's spec

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
        argv = list(command)
        if argv[-1:] in ([RUNNER], [STEP]):
            # A session's step: from it on, the sandbox keeps the agent's work between runs.
            run.session = run.session or argv[-1] == STEP
            argv[-1] = f"{remote.judge_dir}/{argv[-1]}"
        # The run's files and the environment's variables (its secrets) travel in one
        # root-only spec file, never on a command line.
        end = secrets.token_hex(8)  # the run's secret mark of its stdout's end
        spec = cmd.run_spec(
            files=run.files,
            argv=argv, stdin=stdin, env=env or {}, timeout=timeout, uid=run.uid,
            disk_mb=o.disk_mb, max_files=o.max_files, memory_mb=self.run_memory_mb(remote),
            pids=o.max_processes, path=remote.root.runner_path, keep_work=run.session,
            end=end)
        uploads = [(f"{run.dir}/{cmd.SPEC_FILE}", spec)]
        digest = cmd.judge_digest()
        if digest != remote.judge_digest:  # the judge goes once per sandbox
            uploads += [(f"{remote.judge_dir}/{name}", data) for name, data in cmd.judge_files()]
        line = cmd.session_command(remote.judge_dir, run.dir, remote.root.program_prefix(),
                                   self.one_stream)
        started = time.monotonic()
        try:
            # Both calls on one of our threads (one hand-off per run; none where the SDK's
            # calls are futures), each bounded by the SDK's socket timeouts, and the pair by our
            # own deadline: the run's time plus a margin per call for the provider to answer,
            # and then it is the provider that hangs.
            stdout_text, stderr_text, exit_code = self._bounded_run(
                self._upload_and_run, remote, uploads, digest, line, timeout, end,
                deadline=timeout + 2 * o.call_timeout, what="upload and run the judge",
                sandbox_id=remote.id, cancel=cancel)
        except (SandboxError, RunCancelledError):
            run.reusable = False
            raise
        duration = time.monotonic() - started
        stdout, stderr = self._streams(stdout_text, stderr_text, end)
        report = cmd.read_report(stderr)
        # A session's sandbox holds the agent's work to the end: deleted then, never reused.
        run.reusable = bool(report and report.get("clean")) and remote.as_root \
            and not run.session
        if report is None or report.get("error"):
            run.reusable = False
            why = report["error"] if report else (
                f"no report (exit code {exit_code}): "
                + stderr[-500:].decode("utf-8", "replace").strip())
            raise SandboxError(f"the run's program in the {self.service} sandbox failed: "
                               f"{why}", sandbox_id=sandbox.id)
        self._note_confinement(remote, report)
        timed_out = bool(report.get("timed_out"))
        return CommandResult(exit_code=None if timed_out else report.get("exit_code"),
                             stdout=cmd.strip_end(stdout, end),
                             stderr=cmd.strip_report(stderr), timed_out=timed_out,
                             duration=duration)

    def _upload_and_run(self, remote: Remote, uploads: list[tuple[str, bytes]], digest: str,
                        line: str, timeout: float, end: str) -> tuple[str, str, Any]:
        try:
            self._upload(remote, uploads)
        except RunCancelledError:
            raise
        except BaseException as exc:  # noqa: B036 - typed here, so the step is named
            raise self.translate(exc, "upload the run's files", remote.id) from exc
        remote.judge_digest = digest

        def complete(stdout: str, stderr: str) -> bool:
            return cmd.output_complete(*self._streams(stdout, stderr, end), end)

        try:
            return self._execute(remote, line, timeout, complete)
        except RunCancelledError:
            raise
        except BaseException as exc:  # noqa: B036
            raise self.translate(exc, "run the judge", remote.id) from exc

    def _hold_spec(self, remote: Remote, files: list[tuple[str, bytes]]
                   ) -> list[tuple[str, bytes]]:
        """Of ``files``, what still needs an upload: a run's spec that one environment
        variable holds is kept back (``remote.staged``) to ride on the command (see
        :meth:`_with_spec`), for clouds whose command takes an environment (one call, not two).
        """
        remote.staged = [(path, data) for path, data in files
                         if posixpath.basename(path) == cmd.SPEC_FILE
                         and cmd.spec_variable(data) is not None]
        return [f for f in files if f not in remote.staged]

    def _with_spec(self, remote: Remote, command: str) -> tuple[str, dict[str, str] | None]:
        """The shell command that writes the spec :meth:`_hold_spec` kept back and then runs
        ``command``, and the environment it needs (``command`` and None when none was kept)."""
        staged, remote.staged = remote.staged, []
        if not staged:
            return command, None
        ((path, spec),) = staged
        return (shlex.join(cmd.spec_then_run(path, command, "environment")),
                cmd.spec_variable(spec))

    def _streams(self, stdout: str | None, stderr: str | None, end: str) -> tuple[bytes, bytes]:
        """A run's stdout and stderr as bytes (from its one stream where ``one_stream``)."""
        out = (stdout or "").encode("utf-8", "surrogateescape")
        if self.one_stream:
            return cmd.split_one_stream(out, end)
        return out, (stderr or "").encode("utf-8", "surrogateescape")

    def _note_confinement(self, remote: Remote, report: Mapping[str, Any]) -> None:
        """Say once (per provider process and message) what confinement a sandbox lacks."""
        if remote.confinement is not None:
            return
        remote.confinement = dict(report.get("held") or {})
        lost = cmd.missing_confinement(report)
        if lost:
            warn_once(f"{self.service} sandbox confinement is weaker here: " + "; ".join(lost))

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
        not delete (the cloud's own lifetime for them removes them in the end)."""
        self._closing.set()
        with self._lock:
            self._closed = True
            remotes = list(self._remotes.values())
            self._remotes.clear()
            self._idle.clear()
        for remote in remotes:
            self._teardown.spawn(remote.id, self._delete, remote)
        o = self.options
        # A creation in flight ends within its own bounds (create, then three calls).
        left = self._teardown.finish(o.create_timeout + 3 * o.call_timeout + 20)
        if left:
            raise SandboxError(f"the {self.service} provider could not delete its sandboxes: "
                               + "; ".join(f"{sid} ({why})" for sid, why in sorted(left.items())))

    def live_sandboxes(self) -> list[str]:
        """The ids of the sandboxes this provider holds (idle or in use)."""
        with self._lock:
            return sorted(self._remotes)
