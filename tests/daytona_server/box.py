"""One sandbox of the local Daytona server: its request, home, container, sessions and live
processes, and how uploaded files get into it (as its user, when it has one of its own).

Example:
    box = Box("ab12", request, root, contain=True, privileged=True)
    box.write([("deepgym/x.py", b"print(1)")])
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from daytona_api_client import CreateSandbox, SandboxState

from . import container
from .daemon import InnerDaemon
from .users import SandboxUser

if TYPE_CHECKING:
    from .sessions import Session


class HttpError(Exception):
    """An error answer of the server: its HTTP status and message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class Box:
    """One sandbox: its DTO fields, its home directory, its sessions and live processes."""

    def __init__(self, sid: str, request: CreateSandbox, root: Path, contain: bool,
                 privileged: bool, user: SandboxUser | None = None) -> None:
        self.id = sid
        self.request = request
        self.host_dir = root / sid
        self.host_dir.mkdir(mode=0o711)
        self.host_dir.chmod(0o711)
        self.container: container.Container | None = None
        if contain:
            self.container = container.Container(
                sid, memory_gib=request.memory or 1, disk_gib=request.disk or 3,
                network=not request.network_block_all, privileged=privileged,
                disk_dir=root / f"{sid}.disk", user=user).start()
        self.user = user
        self.home = self.container.home if contain else str(self.host_dir)
        self.daemon: InnerDaemon | None = None  # the toolbox on the sandbox's own loopback
        self.state = SandboxState.STARTED
        self.auto_stop = request.auto_stop_interval
        self.auto_delete = request.auto_delete_interval
        self.sessions: dict[str, Session] = {}  # each a long-lived shell (see sessions)
        self.uploaded: list[tuple[str, bytes]] = []  # since the last command (for replay)
        self.procs: set[subprocess.Popen] = set()
        self.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.last_active = self.stopped_at = time.monotonic()

        self.calls_in_flight = 0
        self._calls_lock = threading.Lock()

    def touch(self) -> None:
        """Activity (a toolbox call, a command's end), which keeps the sandbox from its
        auto-stop."""
        self.last_active = time.monotonic()

    @contextlib.contextmanager
    def in_call(self) -> Iterator[None]:
        """Around a toolbox call: the sandbox is busy while it lasts (not idle, not stopped by
        its auto-stop), and its end is activity."""
        with self._calls_lock:
            self.calls_in_flight += 1
        self.touch()
        try:
            yield
        finally:
            with self._calls_lock:
                self.calls_in_flight -= 1
            self.touch()

    def path(self, inside: str) -> Path:
        """A path of the sandbox (absolute, or relative to its home) as this machine sees it;
        a sandbox that is only a directory here has nothing outside its home."""
        full = PurePosixPath(self.home) / inside
        if self.container is not None:
            return self.container.path(str(full))
        if ".." in full.parts or not (full == PurePosixPath(self.home)
                                      or PurePosixPath(self.home) in full.parents):
            raise HttpError(400, f"{inside}: outside the sandbox's home")
        return Path(full)

    def write(self, files: list[tuple[str, bytes]]) -> tuple[list[dict], list[str]]:
        """Uploaded files, each written on its own as the toolbox writes them (in a container,
        as the sandbox's user: wherever that user may write): what was written (path, bytes)
        and why the others were not (``"<path>: <reason>"``)."""
        if self.container is not None and files:
            return _write_inside(self, files)
        written, errors = [], []
        for path, content in files:
            try:
                target = self.path(path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            except HttpError as exc:
                errors.append(exc.message)
            except OSError as exc:
                errors.append(f"{path}: {exc.strerror or exc}")
            else:
                written.append({"path": path, "bytes": len(content)})
        return written, errors

    def kill_all(self, keep_files: bool = False) -> None:
        """End every process of the sandbox; with ``keep_files`` (a stop) its init stays, and
        with it its disk and namespaces."""
        if self.daemon is not None:
            self.daemon.close()
            self.daemon = None
        for session in list(self.sessions.values()):
            session.close()
        self.sessions.clear()
        if self.container is not None and keep_files:
            self.container.kill_processes()
        elif self.container is not None:
            self.container.stop()
        for proc in list(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


# Writes uploaded files inside the sandbox as its user (the umask and modes of a daemon that
# runs as that user: directories 0755, files 0644, an existing file kept as it is), each on its
# own, and says what became of each.
_WRITER = """
import json, os, sys
os.umask(0o022)
written, errors = [], []
for path, shown, text in json.load(sys.stdin):
    try:
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        with open(path, "wb") as f:
            written.append({"path": shown, "bytes": f.write(text.encode("latin-1"))})
    except OSError as exc:
        errors.append(f"{shown}: {exc.strerror or exc}")
json.dump([written, errors], sys.stdout)
"""


def _write_inside(box: Box, files: list[tuple[str, bytes]]) -> tuple[list[dict], list[str]]:
    paths = [(str(PurePosixPath(box.home) / path), path, content.decode("latin-1"))
             for path, content in files]
    command = "exec python3 -I -S -B -c " + shlex.quote(_WRITER)
    done = subprocess.run(box.container.argv(command, box.home), input=json.dumps(paths).encode(),
                          capture_output=True, check=False)
    try:
        written, errors = json.loads(done.stdout)
    except ValueError:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise HttpError(500, f"the toolbox could not write: {' '.join(tail) or done.returncode}"
                        ) from None
    return written, errors
