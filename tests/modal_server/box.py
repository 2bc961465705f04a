"""One sandbox of the local Modal server (a container as the Daytona server makes them, whose
user is root, as in a Modal sandbox) and the commands executed in it.

A command's output is kept whole (the client reads it from any offset, and again after a
dropped stream), both pipes drained at once; each ends at its pipe's end, and the command's
exit is known as soon as it exits. A command is killed (its process group) at its own
``timeout_secs``; the sandbox at its ``timeout_secs``, with every command in it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import string
import time
from pathlib import Path

from daytona_server import container
from daytona_server.replay import Replays
from modal_proto import api_pb2

from deepgym_ray.sandboxes.remote.command import SPEC_FILE, SPEC_VARIABLE

Status = api_pb2.GenericResult


def modal_id(prefix: str, length: int = 22) -> str:
    """An object id as Modal mints them: ``prefix-`` and letters and digits."""
    alphabet = string.ascii_letters + string.digits
    return f"{prefix}-" + "".join(secrets.choice(alphabet) for _ in range(length))


class Exec:
    """A command started by ``TaskExecStart``: its process, its output, its end."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.output = {0: bytearray(), 1: bytearray()}  # the router's STDOUT, STDERR
        self.ended = {0: False, 1: False}  # each pipe at its end
        self.changed = asyncio.Condition()
        self.code: int | None = None  # its exit status once it exited (negative: a signal)
        self.stdin_written = 0
        self.stdin_closed = False
        self.replay: tuple[Replays, tuple] | None = None  # a judge run's first output, kept

    async def start(self, argv: list[str], timeout: float | None, env: dict[str, str],
                    discard: frozenset[int] = frozenset(), replays: Replays | None = None
                    ) -> None:
        """Start ``argv`` with ``env`` in its environment (as Modal sets an exec's secrets:
        never on a command line); the router's file descriptors in ``discard`` (its STDOUT 0,
        STDERR 1) go to /dev/null, as the exec's stdout and stderr configs say (DEVNULL).
        With ``replays`` (bench mode), a judge run seen before (by the spec in its
        environment) is answered from its first output, not started."""
        key = replays.key([(SPEC_FILE, env[SPEC_VARIABLE].encode())]) \
            if replays is not None and SPEC_VARIABLE in env else None
        answer = replays.answer(key) if key is not None else None
        if answer is not None:
            code, out, err = answer
            self.output = {0: bytearray(out), 1: bytearray(err)}
            self.ended, self.code = {0: True, 1: True}, 0 if code is None else code
            return
        if key is not None:
            self.replay = (replays, key)
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=pipe, stdout=devnull if 0 in discard else pipe,
            stderr=devnull if 1 in discard else pipe, env={**os.environ, **env},
            start_new_session=True)
        if timeout is not None:
            asyncio.get_running_loop().call_later(timeout, self.kill)
        for fd in discard:
            self.ended[fd] = True
        pumps = [asyncio.ensure_future(self._pump(pipe, fd))
                 for fd, pipe in ((0, self.proc.stdout), (1, self.proc.stderr))
                 if fd not in discard]
        asyncio.ensure_future(self._reap(pumps))

    async def _pump(self, pipe: asyncio.StreamReader, fd: int) -> None:
        while chunk := await pipe.read(1 << 16):
            async with self.changed:
                self.output[fd] += chunk
                self.changed.notify_all()
        async with self.changed:
            self.ended[fd] = True
            self.changed.notify_all()

    async def _reap(self, pumps: list[asyncio.Future]) -> None:
        code = await self.proc.wait()
        if self.replay is not None:  # a judge run's first output, for the runs after it
            await asyncio.gather(*pumps)
            replays, key = self.replay
            replays.remember(key, code, bytes(self.output[0]), bytes(self.output[1]))
        async with self.changed:
            self.code = code
            self.changed.notify_all()

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def write_stdin(self, offset: int, data: bytes, eof: bool) -> None:
        """Stdin from ``offset`` on (a retried write repeats bytes already written)."""
        fresh = data[max(0, self.stdin_written - offset):]
        if fresh and not self.stdin_closed and offset <= self.stdin_written:
            try:
                if self.proc is not None:  # else a replayed run: as one that read nothing
                    self.proc.stdin.write(fresh)
                    await self.proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the command stopped reading: as a pipe does
            self.stdin_written += len(fresh)
        if eof and not self.stdin_closed:
            self.stdin_closed = True
            if self.proc is not None:
                self.proc.stdin.close()


class ModalBox:
    """A sandbox: ids, tags, its container, its commands, and its result once it ended."""

    def __init__(self, app_id: str, definition: api_pb2.Sandbox, tags: dict[str, str],
                 root: Path, v2: bool) -> None:
        # V1 and V2 sandboxes differ in their id's shape (the client picks its calls by it).
        self.id = "sb-" + secrets.token_hex(12) if v2 else modal_id("sb")
        self.task_id = modal_id("ta")
        self.router_jwt = ""  # the router's token for this sandbox's task (the server's)
        self.app_id, self.tags, self.name = app_id, tags, definition.name
        self.image_id = definition.image_id
        self.created = time.time()
        self.timeout = definition.timeout_secs or 300
        self.end_at = time.monotonic() + self.timeout
        self.result: api_pb2.GenericResult | None = None
        self.network = definition.network_access.network_access_type != \
            api_pb2.NetworkAccess.BLOCKED and not definition.block_network
        memory_mb = definition.resources.memory_mb or 1024
        self.memory_mb = memory_mb
        self.container = container.Container(
            self.id.replace("-", ""), memory_gib=memory_mb / 1024, disk_gib=2,
            network=self.network, disk_dir=root / f"{self.id}.disk")
        self.execs: dict[str, Exec] = {}
        self.ended = asyncio.Event()

    def start(self) -> ModalBox:
        self.container.start()
        return self

    def argv(self, command_args: list[str], workdir: str | None) -> list[str]:
        """What runs ``command_args`` inside (as root, in ``workdir``; the environment the
        process is given reaches it)."""
        import shlex

        return self.container.argv(f"exec {shlex.join(command_args)}",
                                   workdir or container.HOME, as_root=True)

    def end(self, status: int, exception: str = "") -> bool:
        """Mark the sandbox ended with ``status`` and kill every command in it (the container
        is stopped by the caller, off the event loop); False when it had ended already."""
        if self.result is not None:
            return False
        code = {Status.GENERIC_STATUS_TIMEOUT: 124, Status.GENERIC_STATUS_TERMINATED: 137}
        self.result = api_pb2.GenericResult(status=status, exception=exception,
                                            exitcode=code.get(status, 0))
        for each in self.execs.values():
            each.kill()
        self.ended.set()
        return True

    def info(self) -> api_pb2.SandboxInfo:
        return api_pb2.SandboxInfo(
            id=self.id, created_at=self.created, app_id=self.app_id, name=self.name,
            image_id=self.image_id,
            tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in self.tags.items()],
            task_info=api_pb2.TaskInfo(id=self.task_id, result=self.result),
            metadata=api_pb2.SandboxHandleMetadata(app_id=self.app_id, result=self.result))
