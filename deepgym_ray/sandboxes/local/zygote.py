"""The host's side of the warm solution zygote (``deepgym_ray/judge/deepgym_zygote.py``).

One zygote per :class:`~deepgym_ray.sandboxes.local.LocalProvider` (option
``solution_zygote``), started on first use inside bubblewrap with the solution confinement,
keeping only the capabilities it needs for its children (see the zygote's docstring; each
child loses them all when it drops to its run's uid). Runners reach it through a unix socket
in a directory only root can enter on the host (it is not in the zygote's mount namespace, so
no solution sees it); all runs' solution directories live under one parent, bound into the
zygote read-write (each run's directory is 0700 and owned by its own uid; the parent and the
holders are root's and 0711, so a run can neither list nor reach another run's files).

The zygote is tied to this object by a lifeline socket pair rather than ``--die-with-parent``
(which fires when the *thread* that started bwrap exits, and runs start from pool threads).
When it dies, :meth:`SolutionZygote.socket_path` starts a new one (bounded restarts); runners
that cannot reach it start their solution processes with bwrap as before.

Example:
    zygote = SolutionZygote(prefix, python, "/tmp/deepgym-sol-1-zxyz")
    zygote.socket_path()
    # '/tmp/deepgym-run-1-zctl.../ctl'
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from deepgym_ray.judge.deepgym_proc import worker_source
from deepgym_ray.sandboxes.local.janitor import release_at_exit
from deepgym_ray.sandboxes.local.seccomp import filter_fd

logger = logging.getLogger(__name__)

JUDGE = Path(__file__).resolve().parents[2] / "judge"
MAX_RESTARTS = 5


def zygote_prefix(bwrap: Sequence[str], solutions_root: str) -> list[str]:
    """The solution's bwrap options adapted for the zygote: no --die-with-parent (see the
    module docstring), every capability dropped but those it needs to give each child its own
    network and IPC namespaces and to change uid, and the parent of all runs' solution
    directories bound in."""
    prefix = [part for part in bwrap if part != "--die-with-parent"]
    # As real root bwrap keeps every capability unless told otherwise.
    caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
            "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN"]
    cleaned, skip = [], 0
    for i, part in enumerate(prefix):
        if skip:
            skip -= 1
            continue
        if part in ("--cap-add", "--cap-drop"):
            skip = 1
            continue
        cleaned.append(part)
        if i == 0:
            cleaned += caps
    return cleaned + ["--perms", "0711", "--dir", solutions_root,
                      "--bind", solutions_root, solutions_root]


class SolutionZygote:
    """A lazily (re)started solution zygote (see the module docstring)."""

    def __init__(self, bwrap: Sequence[str], python: str, solutions_root: str,
                 seccomp: bytes | None = None) -> None:
        self.command = zygote_prefix(bwrap, solutions_root)
        self.seccomp = seccomp  # the compiled syscall filter bwrap installs in the zygote
        self.python, self.solutions_root = python, solutions_root
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._lifeline: socket.socket | None = None
        self._dir: str | None = None
        self._path: str | None = None
        self._starts = 0
        self._retired: list[subprocess.Popen] = []

    def socket_path(self) -> str | None:
        """Where runners reach a live zygote; None when it cannot run (runners fall back)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._path
            self._stop_locked()
            if self._starts >= MAX_RESTARTS:
                return None
            self._starts += 1
            try:
                self._start_locked()
            except OSError as exc:
                logger.warning("cannot start the solution zygote: %s", exc)
                self._stop_locked()
                return None
            return self._path

    def _start_locked(self) -> None:
        self._dir = tempfile.mkdtemp(prefix=f"deepgym-run-{os.getpid()}-zctl")
        release_at_exit(self._dir)  # removed by close(), or after this process is killed
        os.chmod(self._dir, 0o700)
        self._path = os.path.join(self._dir, "ctl")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        filter_in = None
        try:
            listener.bind(self._path)
            os.chmod(self._path, 0o600)
            listener.listen(64)
            worker = worker_source(str(JUDGE))  # deepgym_worker and its parts
            program = (JUDGE / "deepgym_zygote.py").read_text(encoding="utf-8")
            fds = (listener.fileno(), theirs.fileno())
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
            command = list(self.command) + ["--chdir", "/"]
            if self.seccomp is not None:  # every solution process it forks inherits it
                filter_in = filter_fd(self.seccomp)
                command += ["--seccomp", str(filter_in)]
            for key, value in env.items():
                command += ["--setenv", key, value]
            command += ["--", self.python, "-I", "-S", "-c", program, *map(str, fds), worker]
            self._proc = subprocess.Popen(
                command, pass_fds=(*fds, *(() if filter_in is None else (filter_in,))),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={}, cwd="/", start_new_session=True)
            self._lifeline = ours
        except BaseException:
            ours.close()
            raise
        finally:
            listener.close()
            theirs.close()
            if filter_in is not None:
                os.close(filter_in)

    def _stop_locked(self) -> None:
        if self._lifeline is not None:
            # The zygote exits on this (a run in flight sees it gone: no verdict). Its
            # solution processes do not: bwrap's init waits for all of them; the provider
            # kills them by their runs' cgroups, or its janitor once this process is gone.
            self._lifeline.close()
            self._lifeline = None
        if self._proc is not None:
            self._retired.append(self._proc)  # reaped once it has exited
            self._proc = None
        self._retired = [proc for proc in self._retired if proc.poll() is None]
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = self._path = None

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    @property
    def process(self) -> subprocess.Popen | None:
        """The bwrap process holding the current zygote (None when none is running)."""
        return self._proc

    @property
    def pid(self) -> int | None:
        """The pid of bwrap holding the zygote while it runs (for tests and diagnosis)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None
