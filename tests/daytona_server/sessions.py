"""A process session of the local Daytona server as Daytona's daemon keeps one.

A session is one long-lived shell (bash, as the sandbox's user) reading commands on its
stdin. A command is written to it wrapped: it runs in that shell, its stdout and stderr go
through two FIFOs to two line readers that append each line, behind a marker of its stream
(``STDOUT`` or ``STDERR``, three bytes) and ended by a newline, to the command's log file;
then its exit code is written to a file of its own, and only then are the readers drained.
The daemon polls for the exit-code file every 50 ms and answers with the log as it is then
(so a last line still in a reader can be missing), its markers removed for ``output`` and
split by stream for ``stdout`` and ``stderr``. A second session of an id is 409. (Read in
daytonaio/daytona, ``apps/daemon/pkg/toolbox/process/session/``: the session's shell, the
command's wrapper, the poll, the log's framing.)

Example:
    session = Session.start(box, "s1")
    code, stdout, stderr = session.execute("echo hi; echo oops >&2")   # 0, b'hi\\n', b'oops\\n'
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import uuid
from typing import TYPE_CHECKING

from daytona_api_client import SandboxState

from .box import HttpError

if TYPE_CHECKING:
    from .box import Box

STDOUT, STDERR = b"\x01\x01\x01", b"\x02\x02\x02"
POLL_SECONDS = 0.05
LOG_DIR = ".daytona/sessions"  # under the sandbox user's home


def _octal(marker: bytes) -> str:
    return "".join(f"\\{byte:03o}" for byte in marker)


def wrapped(command: str, log: str, exit_file: str, fifo_id: str) -> str:
    """What the daemon writes to the session's shell for ``command``."""
    log_q, dir_q = shlex.quote(log), shlex.quote(os.path.dirname(log))
    label = 'while IFS= read -r line || [ -n "$line" ]; do printf \'%s%%s\\n\' "$line"; done'
    return (
        "{\n"
        f"  mkdir -p {dir_q} && : > {log_q}\n"
        f'  so={dir_q}/stdout.{fifo_id}.$$; se={dir_q}/stderr.{fifo_id}.$$\n'
        '  rm -f "$so" "$se" && mkfifo "$so" "$se" || exit 1\n'
        f'  ( {label % _octal(STDOUT)} < "$so" ) >> {log_q} & r1=$!\n'
        f'  ( {label % _octal(STDERR)} < "$se" ) >> {log_q} & r2=$!\n'
        f'  {{ {command}; }} > "$so" 2> "$se"\n'
        f'  echo "$?" >> {shlex.quote(exit_file)}\n'
        '  wait "$r1" "$r2"\n'
        '  rm -f "$so" "$se"\n'
        "}\n")


def split_log(log: bytes) -> tuple[bytes, bytes]:
    """A command's log, split by its markers into (stdout, stderr)."""
    streams = {STDOUT: bytearray(), STDERR: bytearray()}
    at, current = 0, None
    while at < len(log):
        found = [(i, m) for m in streams if (i := log.find(m, at)) >= 0]
        nxt, marker = min(found, default=(len(log), None))
        if current is not None:
            streams[current] += log[at:nxt]
        if marker is None:
            break
        current, at = marker, nxt + len(marker)
    return bytes(streams[STDOUT]), bytes(streams[STDERR])


class Session:
    """One session: its shell, and each command's log and exit code in the sandbox."""

    def __init__(self, box: Box, session_id: str, shell: subprocess.Popen) -> None:
        self.box, self.id, self.shell = box, session_id, shell
        self.logs: dict[str, str] = {}  # each command's log file, by its id

    @classmethod
    def start(cls, box: Box, session_id: str, environ: dict[str, str]) -> Session:
        if box.container is not None:
            argv = box.container.argv("exec bash", box.home)
            cwd = "/"
        else:
            argv = ["bash"]
            if box.request.network_block_all and os.geteuid() == 0:
                argv = ["unshare", "--net", *argv]  # as the server's other commands
            cwd = box.home
        shell = subprocess.Popen(argv, cwd=cwd, env=environ, stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        return cls(box, session_id, shell)  # not a live command: idle, it is no activity

    def execute(self, command: str, written=None) -> tuple[str, int, bytes, bytes]:
        """Run ``command`` in the session's shell: its id, exit code, stdout and stderr as
        the daemon reads them from the log when the exit-code file appears; ``written()`` is
        called once the command is on its way (a fault's hook)."""
        cmd_id = str(uuid.uuid4())
        folder = f"{self.box.home}/{LOG_DIR}/{self.id}/{cmd_id}"
        log, exit_file = f"{folder}/output.log", f"{folder}/exit_code"
        self.logs[cmd_id] = log
        try:
            self.shell.stdin.write(wrapped(command, log, exit_file, cmd_id).encode())
            self.shell.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise HttpError(400, f"failed to write command: {exc}") from None
        if written is not None:
            written()
        while True:
            if self.box.state == SandboxState.DESTROYED:
                raise HttpError(404, f"Sandbox with ID or name {self.box.id} not found")
            if self.shell.poll() is not None or self.box.state != SandboxState.STARTED:
                raise HttpError(400, "session cancelled")
            try:
                code = self.box.path(exit_file).read_bytes()
            except (FileNotFoundError, PermissionError):
                time.sleep(POLL_SECONDS)
                continue
            self.box.touch()
            try:
                exit_code = int(code.strip().splitlines()[0])
            except (ValueError, IndexError):
                time.sleep(POLL_SECONDS)  # being written
                continue
            return (cmd_id, exit_code, *self.read_log(cmd_id))

    def read_log(self, cmd_id: str) -> tuple[bytes, bytes]:
        """A command's stdout and stderr as its log has them now; 404 for an unknown one."""
        log = self.logs.get(cmd_id)
        if log is None:
            raise HttpError(404, "command not found")
        try:
            return split_log(self.box.path(log).read_bytes())
        except FileNotFoundError:
            raise HttpError(404, f"{log}: no such file") from None

    def close(self) -> None:
        try:
            os.killpg(self.shell.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.shell.wait()
