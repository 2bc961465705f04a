"""A User-Mode Linux machine with cgroup v2 only, for the in-sandbox program's v2 path.

This machine's own cgroups are v1 (its memory, pids and freezer controllers are bound
there), so no cgroup v2 hierarchy with them can exist on it. User-Mode Linux (Debian's
``user-mode-linux``: a Linux kernel that runs as an ordinary process, no virtualisation
needed) boots a real kernel in about two seconds in which cgroup v2 is all there is; its
PID 1 (``init.py``) makes it a container on a cgroup v2 host and serves commands on its
console, which is this process's pipe (requests in acknowledged pieces: see :meth:`_send`).

Example:
    with UmlMachine(memory_mb=768) as box:
        box.exec("cat /sys/fs/cgroup/cgroup.controllers")["stdout"]
        # 'memory pids\\n'
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KERNEL = "linux.uml"
INIT = Path(__file__).with_name("init.py")
XSTATE = Path(__file__).with_name("xstate.c")
BOOT_WAIT = 120.0
PIECE = 1024  # bytes of a request per console line


def missing() -> str | None:
    """Why no machine can be booted here (None: one can)."""
    if shutil.which(KERNEL) is None:
        return f"{KERNEL} not installed (Debian's user-mode-linux; .ci/run installs it)"
    if shutil.which("gcc") is None:
        return "no gcc to build the kernel's xstate.c (.ci/run installs it)"
    if shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") is None:
        return "no system python3 for the machine (its root is the host's)"
    return None


def build_xstate(directory: str) -> Path:
    """``xstate.c`` built in ``directory`` (the machine's own, private), for the kernel to
    preload: the machine's vector registers kept whole on a host with AVX-512 (see that file).
    Never a shared one: a library another user could put there first would run as the kernel."""
    built = Path(directory) / "xstate.so"
    done = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(built), str(XSTATE),
                           "-ldl"], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"cannot build {XSTATE.name}: {done.stderr.strip()}")
    return built


class UmlMachine:
    """One booted machine (see the module docstring); ``controllers``: what its host
    delegates below its root; ``layout``: ``container`` or ``vm`` (see ``init.py``);
    ``neighbour`` is the pid, in the machine, of a process
    of the sandbox's that must outlive every run."""

    def __init__(self, memory_mb: int = 768, controllers: tuple[str, ...] = ("memory", "pids"),
                 layout: str = "container") -> None:
        self.memory_mb, self.controllers, self.layout = memory_mb, controllers, layout
        self.id = f"uml-{os.urandom(4).hex()}"
        self.neighbour: int | None = None
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None
        self._tmp = tempfile.mkdtemp(prefix="deepgym-uml-")
        self.console: list[bytes] = []  # what else the console said (the kernel's last words)

    def start(self) -> UmlMachine:
        # The machine's root is the host's, so its python is the host's: the system's (the
        # sandbox's commands find it on PATH), not this virtualenv's.
        python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
        argv = [KERNEL, f"mem={self.memory_mb}M", "root=/dev/root", "rootfstype=hostfs",
                "rootflags=/", "ro", "loglevel=2", f"init={python}", "con=null",
                "con0=fd:0,fd:1", "--", "-I", "-S", str(INIT),
                f"controllers={','.join(self.controllers)}", f"layout={self.layout}"]
        # The kernel keeps the machine's memory in a file in TMPDIR: our own, removed after.
        try:
            preload = build_xstate(self._tmp)
        except RuntimeError:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        env = {**os.environ, "TMPDIR": self._tmp, "LD_PRELOAD": str(preload)}
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, process_group=0, env=env)
        # The machine does not see its console's end: should this process die (a test run
        # killed), a watchdog in the machine's process group kills it all.
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, self._tmp],
                process_group=self._proc.pid, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ready = self._answer(time.monotonic() + BOOT_WAIT)
        except (ConnectionError, OSError):
            ready = {}
        if not ready.get("ready"):
            self.stop()
            raise RuntimeError(f"the machine did not come up: {ready or 'its console ended'}")
        self.neighbour = ready["neighbour"]
        return self

    def exec(self, command: str, env: dict[str, str] | None = None,
             timeout: float = 300.0) -> dict[str, Any]:
        """``bash -c command`` as root in the sandbox: stdout, stderr (text), code."""
        reply = self.call({"op": "exec", "command": command, "env": env or {},
                           "timeout": timeout}, timeout + 30)
        for stream in ("stdout", "stderr"):
            reply[stream] = base64.b64decode(reply.get(stream, "")).decode(errors="replace")
        return reply

    def write(self, files: list[tuple[str, bytes]]) -> None:
        self.call({"op": "write", "files": [[path, base64.b64encode(data).decode()]
                                            for path, data in files]}, 120)

    def call(self, request: dict[str, Any], wait: float) -> dict[str, Any]:
        with self._lock:
            if not self.alive():
                raise ConnectionError(f"machine {self.id} is not running")
            self._send(json.dumps(request).encode(), time.monotonic() + wait)
            reply = self._answer(time.monotonic() + wait)
        if "error" in reply:
            raise RuntimeError(f"machine {self.id}: {reply['error']}")
        return reply

    def _send(self, message: bytes, deadline: float) -> None:
        """``message`` in lines of ``PIECE`` bytes, each but the last acknowledged before the
        next: the kernel's console stops taking input for good once more than its tty's
        4 KiB buffer waited to be read at one moment (seen with Debian's 6.1 UML kernel)."""
        for start in range(0, len(message), PIECE):
            last = start + PIECE >= len(message)
            self._proc.stdin.write((b"e" if last else b"c") + message[start:start + PIECE]
                                   + b"\n")
            self._proc.stdin.flush()
            if not last:
                self._answer(deadline, ack=True)

    def _answer(self, deadline: float, ack: bool = False) -> dict[str, Any]:
        """The next JSON line on the console (anything else there, a kernel's word, skipped)."""
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), self.stop)
        timer.start()  # a hung machine is stopped, which ends the read below
        try:
            while True:
                line = self._proc.stdout.readline()
                if not line:
                    last = b"".join(self.console[-20:]).decode(errors="replace")
                    raise ConnectionError(f"machine {self.id} ended; its console's last "
                                          f"lines:\n{last}")
                if ack and line == b"+\n":
                    return {}
                if not ack and line.startswith(b"{"):
                    try:
                        return json.loads(line)
                    except ValueError:
                        pass
                self.console = [*self.console[-199:], line]
        finally:
            timer.cancel()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Power the machine off (or kill it), and wait until none of its processes is left."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.write(b'{"op": "halt"}\n')
                proc.stdin.flush()
                proc.wait(10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        try:  # the kernel's helper processes share its process group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        if self._watchdog is not None:
            self._watchdog.wait()  # reaped: a zombie would keep the group alive
        deadline = time.monotonic() + 30
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> UmlMachine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_WATCHDOG = """
import os, shutil, signal, sys, time
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
shutil.rmtree(sys.argv[1], ignore_errors=True)
os.killpg(0, signal.SIGKILL)
"""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
