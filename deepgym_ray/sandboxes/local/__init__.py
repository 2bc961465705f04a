"""The local sandbox provider: a subprocess per run on this machine, with no way out.

Each run gets its own process group and a temporary work directory; the runner (trusted: it runs
the verifier) works there, killed as a whole group at the deadline. The solution gets more: with
bubblewrap (``bwrap``) it runs in its own network, PID, IPC, UTS and mount namespaces, seeing only
the base interpreter, its standard library (no site-packages) and its own directory, with an
empty environment; when we run as root it also runs as a fresh unprivileged uid (which makes
``RLIMIT_NPROC`` bite), and its directory is a tmpfs of its own (``disk_mb``, ``max_files``:
its space and inodes, all files together, off the host's disk). Resource limits cap each
process's memory, CPU time, processes, file sizes and open files; per-run cgroups (see
``cgroups``) cap all of a run's processes together (memory, tasks), give every run the same
CPU share and count each solution process's CPU with all it started, orphans included (for
its calls' time limits). Every process of a run, the runner (the verifier's process) included,
is under a
syscall filter modelled on Docker's default profile (see ``seccomp``: no kernel keyrings,
io_uring, ptrace, BPF, perf events, module calls or new user namespaces). Where bwrap, root,
cgroups or libseccomp are missing it still runs, and says once which isolation and which
limits are missing.

Speed without less isolation: the judge runner is forked from a warm, trusted fork server
(``forkserver``; one per provider, reachable only over a private socket pair) instead of starting
an interpreter per run, falling back to exec when the server is gone. Likewise solution
processes are forked by a warm solution zygote (``zygote``), itself confined by bwrap, which
gives each its own network and IPC namespaces and drops it to the run's uid; when the zygote
is gone they start with bwrap each.

Cleanup is certain, and happens before ``run`` returns: every solution process is in the run's
freezer cgroup before any solution code runs, and no fork, ``setsid`` or PID namespace takes it
out; the provider freezes the group, kills every member, and checks the kernel's list of
members is empty (else the run raises SandboxError: no verdict on an unproven cleanup). Without
cgroups the runner proves its solution processes gone (bwrap-started: their PID namespaces'
inits have exited; zygote-started: a ``kill -1`` as the run's uid, then a search of /proc finds
none) by creating ``CLEAN_MARKER`` in the work directory; without that proof ``destroy`` kills
by uid the same way. Directories are then removed by ``removal.remove_tree``, which no tree
shape (depth, links, modes) can break.

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
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge import RUNNER, sandbox_judge_files
from deepgym_ray.judge.deepgym_proc import kill_uid
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import (
    CancelSignal,
    CommandResult,
    Sandbox,
    SandboxProvider,
    sandbox_path,
)
from deepgym_ray.sandboxes.local import janitor
from deepgym_ray.sandboxes.local.cgroups import RunCgroup, RunCgroups, missing_guarantees
from deepgym_ray.sandboxes.local.commands import kill_group, run_exec, run_forked
from deepgym_ray.sandboxes.local.deepgym_seccomp import Installer
from deepgym_ray.sandboxes.local.forkserver import RunnerForkServer
from deepgym_ray.sandboxes.local.isolation import (
    bwrap_prefix,
    count_own_processes,
    world_reachable,
)
from deepgym_ray.sandboxes.local.seccomp import missing as seccomp_missing
from deepgym_ray.sandboxes.local.seccomp import sandbox_filter
from deepgym_ray.sandboxes.local.seccomp import wanted as seccomp_wanted
from deepgym_ray.sandboxes.local.workarea import (
    WorkRoot,
    discard,
    discard_if_empty,
    make_shared,
    mount_tmpfs,
    sweep_stale_dirs,
    write_file,
)
from deepgym_ray.sandboxes.local.zygote import SolutionZygote

logger = logging.getLogger(__name__)

MB = 1 << 20
# The runner creates this file in the work directory once it knows that no solution process
# is left (see deepgym_spawn.kill); then destroy() can skip its sweep of /proc by uid.
CLEAN_MARKER = ".deepgym-clean"
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


@dataclass
class _Box:
    work_dir: Path
    solution_dir: Path
    uid: int | None
    timeout: float
    procs: list[subprocess.Popen]
    zygote: subprocess.Popen | None = None  # the zygote serving this run, if any
    cgroup: RunCgroup | None = None  # the run's cgroups, where the machine gives them
    mounted: bool = False  # the solution's directory is its own tmpfs
    deferred: dict[str, bytes] = field(default_factory=dict)  # see put_files


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
        missing = []
        if self.bwrap is None:
            missing.append("no bubblewrap namespaces: the solution can see the host's files "
                           "(including the verifier) and reach the network")
            if self.as_root and not world_reachable(self.solution_python):
                missing.append(f"the solution's uid cannot reach {self.solution_python} (a "
                               "private directory on the way), so scripts and late imports fail")
        if not self.as_root:
            missing.append("not root: the solution runs as this user (no separate uid, no "
                           "process limit of its own)")
        if self.bwrap is None and not self.as_root:
            missing.append("a background process that starts its own session can outlive "
                           "the run")
        if self.seccomp is None:
            missing.append(f"no syscall filter ({self._no_seccomp_why}): kernel keyrings, "
                           "io_uring, ptrace and new user namespaces are open to solutions "
                           "and verifiers")
        if missing:
            _warn_once("local sandbox isolation is weaker here: " + "; ".join(missing))
        self._report_limits()

    def _report_limits(self) -> None:
        """Say once which of a run's aggregate limits hold here, and which do not."""
        lost = missing_guarantees(self.limits)
        why = "; ".join(f"{c}: {r}" for c, r in self.cgroups.missing.items())
        if lost:
            _warn_once("local sandbox limits are weaker here: " + "; ".join(lost)
                       + (f" ({why})" if why else ""))
        else:
            logger.info("local sandbox: per-run cgroups (freezer, memory %d MB, pids %d, cpu "
                        "shares and accounting) and a %d MB / %d-inode tmpfs work area",
                        self.memory_mb, self.max_processes, self.disk_mb, self.max_files)

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
        box = _Box(work, sol, uid, env.timeout, [])
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

    def _mount_work_area(self, box: _Box, uid: int) -> None:
        if not self._tmpfs:
            return
        try:
            mount_tmpfs(box.solution_dir, size_mb=self.disk_mb, inodes=self.max_files, uid=uid)
            box.mounted = True
        except OSError as exc:
            self._tmpfs = False
            _warn_once(f"cannot mount the solution's tmpfs work area ({exc}): disk space is "
                       "limited per file only, inodes not at all")

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        box: _Box = sandbox.handle
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

    def _write_deferred(self, box: _Box) -> None:
        for name, content in box.deferred.items():
            write_file(box.work_dir, sandbox_path(name), content)
        box.deferred.clear()

    def solution_launch(self, sandbox: Sandbox) -> dict:
        """How the runner must start solution processes in this sandbox (sent in its config)."""
        box: _Box = sandbox.handle
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
        box: _Box = sandbox.handle
        environ = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "HOME": str(box.work_dir), "TMPDIR": str(box.work_dir)}
        environ.update(env or {})
        command = list(command)
        if command and command[0] == "python3":
            command[0] = self.python
        options = {"timeout": timeout, "stdin": stdin, "wake": wake,
                   "output_limit": self.output_limit}
        if self.fork_server is not None and command == [self.python, "-I", "-S", "-B", RUNNER]:
            result = run_forked(self.fork_server, box.work_dir, environ, **options)
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
        box: _Box = sandbox.handle
        try:
            self._end_processes(sandbox)
        finally:
            self._discard(box)

    def _end_processes(self, sandbox: Sandbox) -> None:
        box: _Box = sandbox.handle
        for proc in box.procs:
            kill_group(proc)
        if box.cgroup is not None:
            if not box.cgroup.kill_all():
                raise SandboxError("processes of the run survived SIGKILL; the answer was not "
                                   "judged", sandbox_id=sandbox.id)
        elif box.uid is not None and not (box.work_dir / CLEAN_MARKER).is_file():
            if not kill_uid(box.uid, rounds=200, wait_for_zombies=False):
                logger.error("processes of uid %s survived cleanup", box.uid)
                raise SandboxError("processes of the run's uid survived its cleanup; the answer "
                                   "was not judged", sandbox_id=sandbox.id)

    def _discard(self, box: _Box) -> None:
        if box.uid is not None and not self.cgroups.available:
            janitor.forget_uid(box.uid)
        if box.cgroup is not None and box.cgroup.remove():
            box.cgroup = None
        discard(box.work_dir, box.solution_dir.parent,
                mounted=(box.solution_dir,) if box.mounted else ())
