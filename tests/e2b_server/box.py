"""One sandbox of the local E2B server: a container (as the Daytona server's) whose user is
``user`` with passwordless sudo, as in E2B's base template, and its lifetime."""

from __future__ import annotations

import datetime
import os
import secrets
import shlex
import signal
import subprocess
import time
from pathlib import Path, PurePosixPath

from daytona_server import container
from daytona_server.users import SandboxUser

USER = "user"


class E2BBox:
    """A sandbox: its id, access token, container, processes and end of life."""

    def __init__(self, template: str, timeout: float, metadata: dict, env_vars: dict,
                 allow_internet: bool, root: Path) -> None:
        self.id = "i" + secrets.token_hex(9)
        self.template = template
        self.metadata, self.env_vars = metadata, env_vars
        self.allow_internet = allow_internet
        self.access_token = secrets.token_hex(16)
        self.pending_spec: bytes | None = None  # a judge run's spec, uploaded (replay only)
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.end_at = time.monotonic() + timeout
        self.user = SandboxUser.make(USER, sudo="nopasswd")
        self.container = container.Container(
            self.id, memory_gib=1, disk_gib=2, network=allow_internet, disk_dir=root /
            f"{self.id}.disk", user=self.user).start()
        self.procs: dict[int, subprocess.Popen] = {}  # by the pid the SDK was told
        self.killed = False  # then every open stream of it breaks, as a VM's connections do

    def home(self, username: str | None) -> str:
        return "/root" if username == "root" else self.user.home

    def path(self, inside: str, username: str | None) -> str:
        return str(PurePosixPath(self.home(username)) / inside)

    def popen(self, argv: list[str], envs: dict[str, str], cwd: str | None,
              username: str | None, stdin: bool) -> subprocess.Popen:
        """``argv`` started in the sandbox as ``username`` (E2B's user names: ``user``,
        ``root``), in its own process group."""
        # As envd sets them: in the process's environment, never on a command line (which
        # every process of the sandbox can read).
        env = {**os.environ, "HOME": self.home(username), "USER": username or USER,
               **self.env_vars, **envs}
        return subprocess.Popen(
            self.container.argv(f"exec {shlex.join(argv)}", cwd or self.home(username),
                                as_root=username == "root"),
            env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def kill(self) -> None:
        self.killed = True
        for proc in list(self.procs.values()):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.container.stop()

    def detail(self) -> dict:
        """The fields of the API's SandboxDetail."""
        left = max(0.0, self.end_at - time.monotonic())
        return {"templateID": self.template, "sandboxID": self.id, "clientID": "local",
                "startedAt": self.started.isoformat(),
                "endAt": (datetime.datetime.now(datetime.timezone.utc)
                          + datetime.timedelta(seconds=left)).isoformat(),
                "envdVersion": ENVD_VERSION, "cpuCount": 1, "memoryMB": 1024,
                "diskSizeMB": 2048, "state": "running", "metadata": self.metadata,
                "allowInternetAccess": self.allow_internet}


ENVD_VERSION = "0.6.7"
