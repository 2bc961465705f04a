"""The local sandbox provider: a subprocess per run on this machine, with no way out.

Each run gets its own process group and a temporary work directory; the runner (trusted: it runs
the verifier) works there, killed as a whole group at the deadline. The solution gets more: with
bubblewrap (``bwrap``) it runs in its own network, PID, IPC, UTS and mount namespaces, seeing only
the base interpreter, its standard library (no site-packages) and its own directory, with an
empty environment; when we run as root it also runs as a fresh unprivileged uid (which makes
``RLIMIT_NPROC`` bite and lets cleanup find every process it started). Resource limits cap its
memory, CPU time, processes, file sizes and open files. Where bwrap or root is missing it still
runs, and says once which isolation is missing.

Example:
    >>> provider = LocalProvider()                                   # doctest: +SKIP
    >>> box = provider.create(env)                                   # doctest: +SKIP
    >>> provider.put_files(box, {"a.py": b"print(1)"})               # doctest: +SKIP
    >>> provider.run(box, ["python3", "a.py"], timeout=5).stdout     # doctest: +SKIP
    b'1\\n'
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge import RUNNER
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.base import CommandResult, Sandbox, SandboxProvider
from deepgym_ray.sandboxes.forkserver import RunnerForkServer

logger = logging.getLogger(__name__)

MB = 1 << 20
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


def _base_python() -> str:
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def _hidden_dirs(roots: Sequence[str]) -> list[str]:
    """Directories under the bound roots the solution must not see: installed packages
    (site-packages, dist-packages) and this package wherever it lives."""
    hidden = []
    for root in roots:
        for lib in ("lib", "lib64", "local/lib"):
            base = Path(root) / lib
            if not base.is_dir():
                continue
            for child in base.glob("python3*"):
                for name in ("site-packages", "dist-packages"):
                    if (child / name).is_dir():
                        hidden.append(str(child / name))
        if (Path(root) / "lib/python3/dist-packages").is_dir():
            hidden.append(str(Path(root) / "lib/python3/dist-packages"))
    package = os.path.realpath(Path(__file__).resolve().parent.parent)
    if any(package == r or package.startswith(r.rstrip("/") + "/") for r in roots):
        hidden.append(package)
    return sorted(set(hidden))


def _dirs_for(path: str) -> list[str]:
    """bwrap options making every ancestor of ``path`` a traversable directory: bwrap would
    create them 0700 (so an unprivileged solution could not reach the interpreter)."""
    options: list[str] = []
    parts = PurePosixPath(path).parts[1:-1]
    for i in range(len(parts)):
        options += ["--perms", "0755", "--dir", "/" + "/".join(parts[: i + 1])]
    return options


@lru_cache(maxsize=4)
def _bwrap_prefix(python: str, as_root: bool) -> tuple[str, ...] | None:
    """The bwrap options that confine a solution (without --chdir and the command), or None
    when bwrap cannot make the namespaces here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    prefix = [bwrap, "--die-with-parent", "--new-session", "--clearenv"]
    if as_root:
        # No user namespace: the worker drops to its own uid in the real one (see worker).
        prefix += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                   "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        prefix += ["--unshare-all"]
    roots = ["/usr"]
    prefix += ["--ro-bind", "/usr", "/usr"]
    for link in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(link):
            prefix += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            prefix += ["--ro-bind", link, link]
            roots.append(link)
    base = os.path.realpath(sys.base_prefix)
    if not base.startswith("/usr/"):
        prefix += _dirs_for(base) + ["--ro-bind", base, base]
        roots.append(base)
    if os.path.dirname(python) not in (f"{r}/bin" for r in roots):
        prefix += _dirs_for(python) + ["--ro-bind", python, python]
    for hidden in _hidden_dirs(roots):
        prefix += ["--tmpfs", hidden]
    prefix += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    probe = prefix + ["--", python, "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        logger.debug("bwrap probe failed: %s", done.stderr.decode(errors="replace")[-500:])
        return None
    return tuple(prefix)


_SWEPT = False


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait for ``proc`` to exit; False at the deadline. A pidfd wakes us the moment it exits
    (``Popen.wait(timeout)`` polls with sleeps growing to 50 ms, a cost on every run)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or not Linux)
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([pidfd], [], [], max(0.0, timeout))
    finally:
        os.close(pidfd)
    if not ready:
        return proc.poll() is not None
    proc.wait()
    return True


def _sweep_stale_dirs() -> None:
    """Remove sandbox directories left by processes that died mid-run (a killed Ray actor has
    no chance to tear down); their names carry the creating process's pid."""
    global _SWEPT
    if _SWEPT:
        return
    _SWEPT = True
    root = Path(tempfile.gettempdir())
    for path in root.glob("deepgym-[rs][uo][nl]-*-*"):
        pid = path.name.split("-")[2]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)


def _world_reachable(path: str) -> bool:
    """Whether any user can traverse every directory down to ``path``."""
    current = Path(path).parent
    while True:
        try:
            if not current.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
        if current == current.parent:
            return True
        current = current.parent


def _count_own_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


class _Drain(threading.Thread):
    def __init__(self, stream, limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit, self.data = stream, limit, bytearray()
        self.start()

    def run(self) -> None:
        try:
            while chunk := self.stream.read1(1 << 16):
                if len(self.data) < self.limit:
                    self.data += chunk[: self.limit - len(self.data)]
        except (OSError, ValueError):
            pass


class LocalProvider(SandboxProvider):
    """Runs each sandbox as local processes (see the module docstring for the isolation).

    ``memory_mb``, ``max_processes``, ``max_file_mb`` and ``max_open_files`` limit each solution
    process; ``verifier_memory_mb`` limits the runner. ``isolation='none'`` skips bubblewrap.
    ``fork_server=True`` starts judge runners by forking a warm runner process (see
    ``forkserver``) instead of starting an interpreter per run; other commands always exec.
    """

    name = "local"

    def __init__(self, *, memory_mb: int = 1024, max_processes: int = 32,
                 max_file_mb: int = 64, max_open_files: int = 256,
                 verifier_memory_mb: int = 4096, isolation: str = "auto",
                 python: str | None = None, output_limit_mb: int = 32,
                 fork_server: bool = True) -> None:
        if isolation not in ("auto", "bwrap", "none"):
            raise ValueError(f"isolation must be 'auto', 'bwrap' or 'none', got {isolation!r}")
        self.python = python or sys.executable
        self.solution_python = _base_python()
        self.memory_mb, self.max_processes = memory_mb, max_processes
        self.max_file_mb, self.max_open_files = max_file_mb, max_open_files
        self.verifier_memory_mb, self.output_limit = verifier_memory_mb, output_limit_mb * MB
        self.as_root = os.geteuid() == 0
        self.bwrap = None if isolation == "none" else _bwrap_prefix(self.solution_python,
                                                                    self.as_root)
        if isolation == "bwrap" and self.bwrap is None:
            raise SandboxError("isolation='bwrap' was asked for, but bubblewrap cannot create "
                               "namespaces here (install the 'bubblewrap' package)")
        self._nproc = max_processes if self.as_root else _count_own_processes() + 512
        self.fork_server = RunnerForkServer(self.python) if fork_server else None
        _sweep_stale_dirs()
        self._report_isolation()

    def _report_isolation(self) -> None:
        missing = []
        if self.bwrap is None:
            missing.append("no bubblewrap namespaces: the solution can see the host's files "
                           "(including the verifier) and reach the network")
            if self.as_root and not _world_reachable(self.solution_python):
                missing.append(f"the solution's uid cannot reach {self.solution_python} (a "
                               "private directory on the way), so scripts and late imports fail")
        if not self.as_root:
            missing.append("not root: the solution runs as this user (no separate uid, no "
                           "process limit of its own)")
        if self.bwrap is None and not self.as_root:
            missing.append("a background process that starts its own session can outlive "
                           "the run")
        if missing:
            _warn_once("local sandbox isolation is weaker here: " + "; ".join(missing))

    @property
    def isolation(self) -> dict[str, bool]:
        """Which isolation this provider gives solutions on this machine."""
        return {"namespaces": self.bwrap is not None, "separate_uid": self.as_root}

    # --- the provider protocol ------------------------------------------------------------

    def create(self, env: Environment) -> Sandbox:
        work = Path(tempfile.mkdtemp(prefix=f"deepgym-run-{os.getpid()}-"))
        # The solution owns only ``<holder>/work``: the holder stays ours, so the solution can
        # never swap its directory for a symlink to a place the runner would then write into.
        holder = Path(tempfile.mkdtemp(prefix=f"deepgym-sol-{os.getpid()}-"))
        holder.chmod(0o711)
        sol = holder / "work"
        sol.mkdir(mode=0o700)
        uid = None
        if self.as_root:
            uid = (1 << 20) + secrets.randbelow(1 << 29)  # far from real users; unique per run
            os.chown(sol, uid, uid)
        box = _Box(work, sol, uid, env.timeout, [])
        return Sandbox(id=work.name, provider=self.name, handle=box)

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        box: _Box = sandbox.handle
        for name, content in files.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise SandboxError(f"cannot put {name!r}: not a relative path inside the sandbox")
            path = box.work_dir.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)

    def solution_launch(self, sandbox: Sandbox) -> dict:
        """How the runner must start solution processes in this sandbox (sent in its config)."""
        box: _Box = sandbox.handle
        limits = {"as": self.memory_mb * MB, "nproc": self._nproc, "fsize": self.max_file_mb * MB,
                  "nofile": self.max_open_files, "core": 0,
                  "cpu": int(box.timeout) + 1}
        launch = {"kind": "plain", "prefix": [], "python": self.solution_python,
                  "uid": box.uid, "limits": limits}
        if self.bwrap is not None:
            sol = str(box.solution_dir)
            holder = str(box.solution_dir.parent)  # bwrap would make it 0700: untraversable
            launch.update(kind="bwrap", prefix=[*self.bwrap, "--perms", "0711", "--dir", holder,
                                                "--bind", sol, sol])
        return {"launch": launch, "solution_dir": str(box.solution_dir),
                "limits": {"as": self.verifier_memory_mb * MB, "core": 0,
                           "fsize": self.max_file_mb * 4 * MB}}

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> CommandResult:
        box: _Box = sandbox.handle
        environ = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "HOME": str(box.work_dir), "TMPDIR": str(box.work_dir)}
        environ.update(env or {})
        command = list(command)
        if command and command[0] == "python3":
            command[0] = self.python
        started = time.monotonic()
        if self.fork_server is not None and command == [self.python, "-I", "-S", "-B", RUNNER]:
            result = self._run_forked(box, environ, timeout, stdin)
            if result is not None:
                return result
        try:
            proc = subprocess.Popen(command, cwd=box.work_dir, env=environ,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        except OSError as exc:
            raise SandboxError(f"cannot start {command[0]!r}: {exc}",
                               sandbox_id=sandbox.id) from exc
        box.procs.append(proc)
        out, err = _Drain(proc.stdout, self.output_limit), _Drain(proc.stderr, MB)
        try:
            proc.stdin.write(stdin or b"")
            proc.stdin.close()
        except OSError:
            pass  # it died at once; its exit code says so
        timed_out = not wait_exit(proc, timeout)
        self._kill_group(proc)  # at the deadline, and also whatever it left behind
        out.join(5)
        err.join(5)
        return CommandResult(exit_code=None if timed_out else proc.returncode,
                             stdout=bytes(out.data), stderr=bytes(err.data),
                             timed_out=timed_out, duration=time.monotonic() - started)

    def _run_forked(self, box: _Box, environ: Mapping[str, str], timeout: float,
                    stdin: bytes | None) -> CommandResult | None:
        """The judge runner, forked by the warm server; None when the server is unusable."""
        started = time.monotonic()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            run = self.fork_server.start_runner(str(box.work_dir), environ, (in_r, out_w, err_w))
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        if run is None:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            return None
        out = _Drain(os.fdopen(out_r, "rb"), self.output_limit)
        err = _Drain(os.fdopen(err_r, "rb"), MB)
        try:
            with os.fdopen(in_w, "wb") as pipe:
                pipe.write(stdin or b"")
        except OSError:
            pass  # it died at once; its exit code says so
        try:
            timed_out = not run.wait(timeout)
            if timed_out:
                run.kill()  # the monitor kills the group, whatever it left behind too
        finally:
            run.close()
        out.join(5)
        err.join(5)
        return CommandResult(exit_code=None if timed_out else run.returncode,
                             stdout=bytes(out.data), stderr=bytes(err.data),
                             timed_out=timed_out, duration=time.monotonic() - started)

    def close(self) -> None:
        """Stop the runner fork server (a later run starts a new one)."""
        if self.fork_server is not None:
            self.fork_server.close()

    def destroy(self, sandbox: Sandbox) -> None:
        box: _Box = sandbox.handle
        for proc in box.procs:
            self._kill_group(proc)
        if box.uid is not None:
            kill_uid(box.uid)
        for path in (box.work_dir, box.solution_dir.parent):
            shutil.rmtree(path, ignore_errors=True)

    @staticmethod
    def _kill_group(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if not wait_exit(proc, 10):
            logger.error("process %s survived SIGKILL for 10s", proc.pid)


def _uid_processes(uid: int) -> list[int]:
    """Live (not zombie) processes whose real uid is ``uid``. Reads /proc/<pid>/status, since
    a process that changed uid is not dumpable and its /proc entry belongs to root."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        state = uid_line = None
        for line in text.splitlines():
            if line.startswith("State:"):
                state = line.split()[1]
            elif line.startswith("Uid:"):
                uid_line = line.split()[1:]
                break
        if uid_line and state != "Z" and str(uid) in uid_line:
            pids.append(int(entry))
    return pids


def kill_uid(uid: int) -> None:
    """SIGKILL every process owned by ``uid`` until none is left (bounded)."""
    for _ in range(200):
        pids = _uid_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)
    logger.error("processes of uid %s survived cleanup", uid)
