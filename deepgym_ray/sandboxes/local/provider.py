"""The local provider's class: setting it up on this machine, and the provider protocol.

What it isolates and how is the package's docstring (:mod:`deepgym_ray.sandboxes.local`).

Example:
    provider = LocalProvider()
    box = provider.create(env)
    provider.put_files(box, {"a.py": b"print(1)"})
    provider.run(box, ["python3", "a.py"], timeout=5).stdout
    # b'1\\n'
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge import RUNNER, STEP, sandbox_judge_files
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import (
    CancelSignal,
    CommandResult,
    Sandbox,
    SandboxProvider,
    sandbox_path,
)
from deepgym_ray.sandboxes.local import janitor
from deepgym_ray.sandboxes.local.cgroups import RunCgroups
from deepgym_ray.sandboxes.local.commands import run_exec, run_forked
from deepgym_ray.sandboxes.local.deepgym_seccomp import Installer
from deepgym_ray.sandboxes.local.forkserver import RunnerForkServer
from deepgym_ray.sandboxes.local.isolation import bwrap_prefix, count_own_processes
from deepgym_ray.sandboxes.local.report import warn_isolation, warn_limits, warn_once
from deepgym_ray.sandboxes.local.runbox import CLEAN_MARKER, RunBox, discard_box, end_processes
from deepgym_ray.sandboxes.local.seccomp import missing as seccomp_missing
from deepgym_ray.sandboxes.local.seccomp import sandbox_filter
from deepgym_ray.sandboxes.local.seccomp import wanted as seccomp_wanted
from deepgym_ray.sandboxes.local.workarea import (
    WorkRoot,
    discard_if_empty,
    make_shared,
    mount_tmpfs,
    sweep_stale_dirs,
    write_file,
)
from deepgym_ray.sandboxes.local.zygote import SolutionZygote

logger = logging.getLogger(__name__)

__all__ = ["CLEAN_MARKER", "LocalProvider"]

MB = 1 << 20


def _base_python() -> str:
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


class LocalProvider(SandboxProvider):
    """Runs each sandbox as local processes (see the module docstring for the isolation).

    ``memory_mb``, ``max_processes``, ``max_file_mb`` and ``max_open_files`` limit each solution
    process; as root, ``memory_mb`` and ``max_processes`` also bound all of a run's solution
    processes together (cgroups), and ``disk_mb`` and ``max_files`` bound the space and inodes
    of its work area (a tmpfs). ``verifier_memory_mb`` limits the runner. ``isolation='none'``
    skips bubblewrap.
    ``fork_server=True`` starts judge runners by forking a warm runner process (see
    ``forkserver``) instead of starting an interpreter per run; other commands always exec.
    ``solution_zygote`` (on by default where bwrap and root are there) forks solution processes
    from a warm, confined zygote (see ``zygote``) instead of a bwrap and interpreter each; when
    not given, the environment variable ``DEEPGYM_SOLUTION_ZYGOTE=0`` turns it off.
    ``seccomp`` (on by default where libseccomp's binding is installed; when not given,
    ``DEEPGYM_SECCOMP=0`` turns it off) puts runners, exec'd commands and solution processes
    under the syscall filter of ``seccomp``.
    """

    name = "local"
    cancellable = True  # a given-up run is killed like one at its deadline (see ``run``)
    keeps_work = True  # a sandbox's directory lasts until it is destroyed

    def __init__(self, *, memory_mb: int = 1024, max_processes: int = 32,
                 max_file_mb: int = 64, max_open_files: int = 256,
                 verifier_memory_mb: int = 4096, isolation: str = "auto",
                 python: str | None = None, output_limit_mb: int = 32,
                 fork_server: bool = True, solution_zygote: bool | None = None,
                 disk_mb: int = 256, max_files: int = 20000,
                 seccomp: bool | None = None) -> None:
        if isolation not in ("auto", "bwrap", "none"):
            raise ValueError(f"isolation must be 'auto', 'bwrap' or 'none', got {isolation!r}")
        self.python = python or sys.executable
        self.solution_python = _base_python()
        self.memory_mb, self.max_processes = memory_mb, max_processes
        self.max_file_mb, self.max_open_files = max_file_mb, max_open_files
        self.verifier_memory_mb, self.output_limit = verifier_memory_mb, output_limit_mb * MB
        self.disk_mb, self.max_files = disk_mb, max_files
        self.as_root = os.geteuid() == 0
        self.cgroups = RunCgroups.probe() if self.as_root else RunCgroups({}, {"all": "not root"})
        self.cgroups.sweep_stale()
        if self.cgroups.available:  # this process's runs die with it, even by SIGKILL
            janitor.kill_groups_at_exit(f"{self.cgroups.prefix}{os.getpid()}-",
                                        self.cgroups.parents.values())
        self._tmpfs = self.as_root  # until a mount fails
        self._work_root = WorkRoot(mount=self.as_root)  # the runners' (see workarea)
        self.bwrap = None if isolation == "none" else bwrap_prefix(self.solution_python,
                                                                    self.as_root)
        if isolation == "bwrap" and self.bwrap is None:
            raise SandboxError("isolation='bwrap' was asked for, but bubblewrap cannot create "
                               "namespaces here (install the 'bubblewrap' package)")
        self._nproc = max_processes if self.as_root else count_own_processes() + 512
        # The syscall filter (see ``seccomp``): runners, exec'd commands and the zygote.
        if seccomp is None:
            seccomp = seccomp_wanted()
        self.seccomp = sandbox_filter(self.as_root) if seccomp else None
        self._no_seccomp_why = seccomp_missing.get(self.as_root) if seccomp else "turned off"
        self._install_filter = None if self.seccomp is None else Installer(self.seccomp)
        self.fork_server = RunnerForkServer(self.python, self.seccomp) if fork_server else None
        if solution_zygote is None:
            solution_zygote = os.environ.get("DEEPGYM_SOLUTION_ZYGOTE", "1") != "0"
        self.zygote = self._solutions_root = None
        if solution_zygote and self.bwrap is not None and self.as_root:
            self._solutions_root = tempfile.mkdtemp(prefix=f"deepgym-sol-{os.getpid()}-z")
            os.chmod(self._solutions_root, 0o711)
            try:  # each run's tmpfs, mounted later, must show in the zygote's namespace too
                make_shared(self._solutions_root, size_mb=disk_mb)
                # A mount outlives this process: release it even if close() is never called,
                # and even if this process is killed.
                weakref.finalize(self, discard_if_empty, self._solutions_root)
                janitor.release_at_exit(self._solutions_root)
            except OSError as exc:
                self._tmpfs = False
                logger.debug("no shared mount for the zygote: %s", exc)
            self.zygote = SolutionZygote(self.bwrap, self.solution_python, self._solutions_root,
                                         self.seccomp)
        sweep_stale_dirs()
        self._report_isolation()

    def _report_isolation(self) -> None:
        warn_isolation(namespaces=self.bwrap is not None, as_root=self.as_root,
                       solution_python=self.solution_python,
                       no_seccomp_why=None if self.seccomp is not None
                       else self._no_seccomp_why or "not available")
        warn_limits(self.limits, self.cgroups.missing,
                    f"per-run cgroups (freezer, memory {self.memory_mb} MB, pids "
                    f"{self.max_processes}, cpu shares and accounting) and a {self.disk_mb} MB "
                    f"/ {self.max_files}-inode tmpfs work area")

    @property
    def limits(self) -> dict[str, bool]:
        """Which per-run guarantees hold on this machine (see ``cgroups`` and ``workarea``)."""
        return {"cleanup_by_cgroup": self.cgroups.has("freezer"),
                "run_memory": self.cgroups.has("memory"),
                "run_processes": self.cgroups.has("pids"),
                "cpu_fairness": self.cgroups.has("cpu"),
                "cpu_accounting": self.cgroups.has("cpuacct"),
                "work_area": self._tmpfs}

    @property
    def isolation(self) -> dict[str, bool]:
        """Which isolation this provider gives solutions on this machine."""
        return {"namespaces": self.bwrap is not None, "separate_uid": self.as_root,
                "syscall_filter": self.seccomp is not None}

    # --- the provider protocol ------------------------------------------------------------

    def create(self, env: Environment) -> Sandbox:
        work = self._work_root.make_dir()
        # The solution owns only ``<holder>/work``: the holder stays ours, so the solution can
        # never swap its directory for a symlink to a place the runner would then write into.
        if self._solutions_root is not None:  # where the zygote sees every run's directory
            os.makedirs(self._solutions_root, mode=0o711, exist_ok=True)
            holder = Path(tempfile.mkdtemp(prefix="run-", dir=self._solutions_root))
        else:
            holder = Path(tempfile.mkdtemp(prefix=f"deepgym-sol-{os.getpid()}-"))
        holder.chmod(0o711)
        sol = holder / "work"
        sol.mkdir(mode=0o700)
        uid = None
        box = RunBox(work, sol, uid, env.timeout, [])
        try:
            if self.as_root:
                box.uid = uid = (1 << 20) + secrets.randbelow(1 << 29)  # far from real users
                os.chown(sol, uid, uid)
                self._mount_work_area(box, uid)
            if self.cgroups.available:
                box.cgroup = self.cgroups.create(work.name.rsplit("-", 1)[-1],
                                                 memory_bytes=self.memory_mb * MB,
                                                 pids=self.max_processes)
        except OSError as exc:
            self._discard(box)
            raise SandboxError(f"cannot make the run's sandbox: {exc}") from exc
        if uid is not None and not self.cgroups.available:  # no group to kill it by
            janitor.kill_uid_at_exit(uid)
        return Sandbox(id=work.name, provider=self.name, handle=box)

    def _mount_work_area(self, box: RunBox, uid: int) -> None:
        if not self._tmpfs:
            return
        try:
            mount_tmpfs(box.solution_dir, size_mb=self.disk_mb, inodes=self.max_files, uid=uid)
            box.mounted = True
        except OSError as exc:
            self._tmpfs = False
            warn_once(f"cannot mount the solution's tmpfs work area ({exc}): disk space is "
                       "limited per file only, inodes not at all")

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        box: RunBox = sandbox.handle
        judge = sandbox_judge_files() if self.fork_server is not None else {}
        for name, content in files.items():
            rel = sandbox_path(name)
            if judge.get(name) == content:
                # A runner forked by the server has the judge loaded already: its files are
                # written only if a command is exec'd here (11 files a run, 140 kB).
                box.deferred[name] = content
                continue
            box.deferred.pop(name, None)
            write_file(box.work_dir, rel, content)

    def _write_deferred(self, box: RunBox) -> None:
        for name, content in box.deferred.items():
            write_file(box.work_dir, sandbox_path(name), content)
        box.deferred.clear()

    def solution_launch(self, sandbox: Sandbox) -> dict:
        """How the runner must start solution processes in this sandbox (sent in its config)."""
        box: RunBox = sandbox.handle
        limits = {"as": self.memory_mb * MB, "nproc": self._nproc, "fsize": self.max_file_mb * MB,
                  "nofile": self.max_open_files, "core": 0,
                  "cpu": int(box.timeout) + 1}
        launch = {"kind": "plain", "prefix": [], "python": self.solution_python,
                  "uid": box.uid, "limits": limits}
        if box.cgroup is not None:  # the runner puts every solution process in them first
            launch["cgroups"] = box.cgroup.procs_files()
        if self.bwrap is not None:
            sol = str(box.solution_dir)
            holder = str(box.solution_dir.parent)  # bwrap would make it 0700: untraversable
            launch.update(kind="bwrap", prefix=[*self.bwrap, "--perms", "0711", "--dir", holder,
                                                "--bind", sol, sol])
            if self.zygote is not None and box.uid is not None:
                # None when the zygote cannot run: the runner then uses bwrap as above.
                launch["zygote"] = self.zygote.socket_path()
                box.zygote = self.zygote.process if launch["zygote"] else None
        return {"launch": launch, "solution_dir": str(box.solution_dir),
                "clean_marker": str(box.work_dir / CLEAN_MARKER),
                "limits": {"as": self.verifier_memory_mb * MB, "core": 0,
                           "fsize": self.max_file_mb * 4 * MB}}

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None,
            cancel: CancelSignal | None = None) -> CommandResult:
        """Run ``command``; at ``timeout``, or once ``cancel`` is set, its process group is
        killed (and with the cleanup below, everything of the run)."""
        wake = cancel.fileno() if cancel is not None else None
        result = self._run(sandbox, command, timeout=timeout, stdin=stdin, env=env, wake=wake)
        self._end_processes(sandbox)  # before anyone sees the result
        zygote = sandbox.handle.zygote
        if zygote is not None and zygote.poll() is not None:
            # The zygote only exits when we close it, and its death takes the run's solution
            # processes with it: whatever the runner made of that, it was not the answer's doing.
            raise SandboxError("the solution zygote died during the run (exit code "
                               f"{zygote.returncode}); the answer was not judged",
                               sandbox_id=sandbox.id)
        return result

    def _run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
             stdin: bytes | None, env: Mapping[str, str] | None,
             wake: int | None) -> CommandResult:
        box: RunBox = sandbox.handle
        environ = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "HOME": str(box.work_dir), "TMPDIR": str(box.work_dir)}
        environ.update(env or {})
        command = list(command)
        if command and command[0] == "python3":
            command[0] = self.python
        options = {"timeout": timeout, "stdin": stdin, "wake": wake,
                   "output_limit": self.output_limit}
        program = {RUNNER: "runner", STEP: "step"}.get(command[-1]) \
            if command[:-1] == [self.python, "-I", "-S", "-B"] else None
        if self.fork_server is not None and program is not None:
            result = run_forked(self.fork_server, box.work_dir, environ, program=program,
                                **options)
            if result is not None:
                return result
        self._write_deferred(box)
        return run_exec(command, box.work_dir, environ, procs=box.procs,
                        preexec=self._install_filter, **options)

    def warm(self) -> None:
        """Start the runner fork server and the solution zygote now: their start-up (an
        interpreter each, 0.1 to 0.5 s) then overlaps the caller's own work."""
        if self.fork_server is not None:
            self.fork_server.start()
        if self.zygote is not None:
            self.zygote.socket_path()

    def close(self) -> None:
        """Stop the runner fork server and the zygote (a later run starts new ones)."""
        if self.fork_server is not None:
            self.fork_server.close()
        if self.zygote is not None:
            self.zygote.close()
            discard_if_empty(self._solutions_root)
        self._work_root.close()

    def destroy(self, sandbox: Sandbox) -> None:
        """Kill every process of the run (verified), then remove its groups and directories;
        raises SandboxError when that cannot be proven (then nothing was judged)."""
        box: RunBox = sandbox.handle
        try:
            self._end_processes(sandbox)
        finally:
            self._discard(box)

    def _end_processes(self, sandbox: Sandbox) -> None:
        end_processes(sandbox.handle, sandbox.id)

    def _discard(self, box: RunBox) -> None:
        discard_box(box, by_cgroup=self.cgroups.available)
