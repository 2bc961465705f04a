"""The host's side of the runner fork server (``deepgym_forkserver.py`` beside this file).

One server per :class:`~deepgym_ray.sandboxes.local.LocalProvider`, started on first use over
a private socket pair. :meth:`RunnerForkServer.start_runner` hands the server a run's stdio
pipes and a report socket and returns a :class:`ForkedRun`, whose ``wait`` gives the runner's
exit code (or None at the deadline, after killing its process group). When the server cannot
be used (it died, or never started) ``start_runner`` returns None and the caller starts the
runner by exec instead; the next run starts a fresh server.

Example:
    server = RunnerForkServer(sys.executable)
    run = server.start_runner("/tmp/run", {"PATH": "/usr/bin"}, stdio)
    run.wait(timeout=10)
    # 0
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from deepgym_ray.sandboxes.local.seccomp import filter_fd

logger = logging.getLogger(__name__)

SERVER = str(Path(__file__).resolve().parent / "deepgym_forkserver.py")
START_TIMEOUT = 10.0  # for the "started" report; the server only forks once meanwhile
MAX_RESTARTS = 5
DRAIN_WAIT = 5.0  # how long output is read after the runner's exit (a child may hold a pipe)


class ForkedRun:
    """One runner started by the fork server: its pid and the socket the server reports on.
    ``lost`` is True when the server went away before reporting the runner's exit (then the
    runner's group has been killed and nothing it said can be trusted to be complete)."""

    def __init__(self, pid: int, report: socket.socket) -> None:
        self.pid, self.report, self._buffer = pid, report, b""
        self.returncode: int | None = None
        self.lost = False

    def _line(self, deadline: float, wake: int | None = None) -> bytes | None:
        """The next report line; None at the deadline or once ``wake`` is readable; b"" when
        the server is gone."""
        waiting = [self.report] if wake is None else [self.report, wake]
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select(waiting, [], [], left)
            if self.report not in ready:
                if ready:  # woken: the run was given up
                    return None
                continue
            line = self._read_line()
            if line is not None:
                return line
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def wait(self, timeout: float, wake: int | None = None) -> bool:
        """Wait for the runner to exit; False at the deadline, or once the descriptor ``wake``
        is readable (the runner still runs: the caller kills it)."""
        line = self._line(time.monotonic() + max(0.0, timeout), wake)
        if line is None:
            return False
        self._ended(line)
        return True

    def collect(self, outputs: tuple[int, int], limits: tuple[int, int], timeout: float,
                wake: int | None = None) -> tuple[bool, bytes, bytes]:
        """Wait for the runner's exit as ``wait`` does (killing it at the deadline or once
        ``wake`` is readable) while reading its stdout and stderr (``outputs``, read ends the
        caller closes), each kept up to its limit, until both end or ``DRAIN_WAIT`` after the
        exit. Returns (timed out, stdout, stderr). One thread does it all: a reader thread per
        pipe cost 0.2 ms of CPU each, on every run."""
        data = {fd: bytearray() for fd in outputs}
        room = dict(zip(outputs, limits, strict=True))
        poller = select.poll()
        watched = (self.report.fileno(), *(() if wake is None else (wake,)))
        for fd in (*outputs, *watched):
            poller.register(fd, select.POLLIN)
        open_fds, timed_out, ended = set(outputs), False, None
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            if ended is None and (timed_out or time.monotonic() >= deadline):
                timed_out = True  # at the deadline, or given up
                self.kill()  # the server kills the group, whatever it left behind too
            if ended is None and (timed_out or self.returncode is not None):
                ended = time.monotonic()
                for fd in watched:  # both stay readable from now on
                    poller.unregister(fd)
            left = (deadline if ended is None else ended + DRAIN_WAIT) - time.monotonic()
            if ended is not None and (not open_fds or left <= 0):
                break  # at left <= 0, something the runner started still holds a pipe
            for fd, _event in poller.poll(max(0.0, left) * 1000):
                if fd in open_fds:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        open_fds.discard(fd)
                        poller.unregister(fd)
                    elif room[fd] > len(data[fd]):
                        data[fd] += chunk[: room[fd] - len(data[fd])]
                elif ended is None and fd == wake:
                    timed_out = True
                elif ended is None and fd == self.report.fileno():
                    line = self._read_line()
                    if line is not None:
                        self._ended(line)
        return timed_out, bytes(data[outputs[0]]), bytes(data[outputs[1]])

    def _read_line(self) -> bytes | None:
        """One read of the report socket: the line once complete (b"" if the server is gone),
        else None."""
        try:
            chunk = self.report.recv(256)
        except OSError:
            chunk = b""
        if not chunk:
            return b""
        self._buffer += chunk
        if b"\n" not in self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _ended(self, line: bytes) -> None:
        """Take the server's report of the runner's end (b"": the server is gone)."""
        if line.startswith(b"exit "):
            self.returncode = int(line.split()[1])
        else:  # the server vanished: make sure the runner's group goes with it
            self.returncode, self.lost = -signal.SIGKILL, True
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """Kill the runner's process group and wait (bounded) for the server's report."""
        if self.returncode is not None:
            return
        try:
            self.report.sendall(b"kill\n")
        except OSError:
            pass
        if not self.wait(10):
            logger.error("forked runner %s survived SIGKILL for 10s", self.pid)

    def close(self) -> None:
        self.report.close()  # the server kills the group if the runner still runs


class RunnerForkServer:
    """A lazily started fork server for judge runners (see the module docstring)."""

    def __init__(self, python: str, seccomp: bytes | None = None) -> None:
        self.python = python
        self.seccomp = seccomp  # the compiled syscall filter the server installs in itself
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        self._starts = 0
        self._retired: list[subprocess.Popen] = []  # closed, finishing their runs

    def start(self) -> None:
        """Start the server now if it is not running (runs start it on first use anyway)."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> socket.socket | None:
        if self._control is not None and self._proc is not None and self._proc.poll() is None:
            return self._control
        self._shutdown_locked()
        if self._starts >= MAX_RESTARTS:
            return None
        self._starts += 1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command, fds = [self.python, "-I", "-S", "-B", SERVER, str(theirs.fileno())], []
        try:
            if self.seccomp is not None:
                fds.append(filter_fd(self.seccomp))
                command.append(str(fds[-1]))
            self._proc = subprocess.Popen(
                command, pass_fds=(theirs.fileno(), *fds), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True)  # a Ctrl-C to the host's group must not kill it
        except OSError as exc:
            logger.warning("cannot start the runner fork server: %s", exc)
            ours.close()
            return None
        finally:
            theirs.close()
            for fd in fds:
                os.close(fd)
        self._control = ours
        return ours

    def start_runner(self, cwd: str, env: Mapping[str, str], stdio: tuple[int, int, int],
                     program: str = "runner") -> ForkedRun | None:
        """Fork a runner (``program="step"``: a session's step program) with ``stdio``
        (stdin, stdout, stderr fds; the caller keeps and closes them) in ``cwd`` with ``env``;
        None when the server cannot be used."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = json.dumps({"cwd": cwd, "env": dict(env), "program": program}).encode()
        with self._lock:
            control = self._ensure()
            sent = False
            if control is not None:
                try:
                    socket.send_fds(control, [request], [*stdio, theirs.fileno()])
                    sent = True
                except OSError as exc:
                    logger.warning("the runner fork server is gone (%s); starting runners by "
                                   "exec until it is restarted", exc)
                    self._shutdown_locked()
        theirs.close()
        if not sent:
            ours.close()
            return None
        run = ForkedRun(0, ours)
        line = run._line(time.monotonic() + START_TIMEOUT)
        if not line or not line.startswith(b"started "):
            ours.close()  # if a runner did start, the server kills it on this close
            with self._lock:
                self._shutdown_locked()
            return None
        run.pid = int(line.split()[1])
        return run

    def _shutdown_locked(self, kill: bool = True) -> None:
        """Stop using the server. ``kill``: it is broken, end it now (its runs in flight lose
        their reports: no verdict); otherwise it finishes the runs in flight, then exits."""
        if self._control is not None:
            self._control.close()  # the server takes no more runs on this
            self._control = None
        if self._proc is not None:
            if kill:
                try:
                    self._proc.kill()
                    self._proc.wait(5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            else:
                self._retired.append(self._proc)
            self._proc = None
        self._retired = [proc for proc in self._retired if proc.poll() is None]

    def close(self) -> None:
        with self._lock:
            self._shutdown_locked(kill=False)

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (for tests and diagnosis)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None
