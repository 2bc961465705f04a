"""The task command router (``modal.task_command_router.TaskCommandRouter``): how the client
runs a command in a sandbox and moves its input and output, on the servicer base class the
``modal`` wheel ships.

A call carries the sandbox's router JWT (``authorization: Bearer ...``), minted by the control
plane for that sandbox's task. As the real router: a start is idempotent on the client's
``exec_id`` and a stdin write on its ``offset`` (the client retries both); output is read from
any offset, in non-empty messages, the stream ending at the pipe's end; a wait answers the exit
(``code``, or ``signal`` for a killed command) and gives up with DEADLINE_EXCEEDED before the
client's 60 s per attempt; a task whose sandbox has ended is NOT_FOUND. Modal's file calls
(``sandbox.filesystem``) run a tool of Modal's image, which this server's sandboxes lack: the
provider writes files through a command's stdin instead.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from grpclib import GRPCError, Status
from modal_proto import task_command_router_pb2 as tcr
from modal_proto.task_command_router_grpc import TaskCommandRouterBase

from .api import unimplemented_elsewhere
from .box import Exec, ModalBox

if TYPE_CHECKING:
    from .server import ModalTestServer

SECRET_VALUE_MAX = 32_768  # characters (Modal's secrets guide); an exec's variables are one
WAIT_ATTEMPT = 50.0  # seconds; the client's own deadline per attempt is 60
CHUNK = 1 << 20


@unimplemented_elsewhere
class Router(TaskCommandRouterBase):
    """Commands in sandboxes: start, output, input, exit."""

    def __init__(self, server: ModalTestServer) -> None:
        self.server = server

    async def _request(self, stream: Any, call: str) -> tuple[Any, ModalBox]:
        request = await stream.recv_message()
        box = self.server.by_task.get(request.task_id)
        token = stream.metadata.get("authorization", "").removeprefix("Bearer ")
        if box is None or box.result is not None:
            raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id} not found")
        if token != box.router_jwt:
            raise GRPCError(Status.UNAUTHENTICATED, "invalid router token")
        await self.server.fault(call, stream, box)
        return request, box

    def _exec(self, box: ModalBox, exec_id: str) -> Exec:
        found = box.execs.get(exec_id)
        if found is None:
            raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found")
        return found

    async def TaskExecStart(self, stream: Any) -> None:
        request, box = await self._request(stream, "exec")
        if request.exec_id not in box.execs:  # a retried start starts nothing new
            env = {k: v for source in request.secret_sources
                   for k, v in source.env.contents.items()}
            too_long = [k for k, v in env.items() if len(v) > SECRET_VALUE_MAX]
            if too_long:  # as Modal bounds a secret's values
                raise GRPCError(Status.INVALID_ARGUMENT, f"secret value of {too_long[0]} is "
                                f"longer than {SECRET_VALUE_MAX} characters")
            argv = box.argv(list(request.command_args), request.workdir or None)
            started = box.execs[request.exec_id] = Exec()
            timeout = request.timeout_secs if request.HasField("timeout_secs") else None
            off = (request.stdout_config == tcr.TASK_EXEC_STDOUT_CONFIG_DEVNULL,
                   request.stderr_config == tcr.TASK_EXEC_STDERR_CONFIG_DEVNULL)
            discard = frozenset(fd for fd in (0, 1) if off[fd])
            await started.start(argv, timeout, env, discard, self.server.replays)
        await stream.send_message(tcr.TaskExecStartResponse())

    async def TaskExecStdioRead(self, stream: Any) -> None:
        request, box = await self._request(stream, "read")
        run = self._exec(box, request.exec_id)
        fd, offset = request.file_descriptor, request.offset
        while True:
            async with run.changed:
                await run.changed.wait_for(lambda at=offset: len(run.output[fd]) > at
                                           or run.ended[fd] or box.result is not None)
                chunk = bytes(run.output[fd][offset:offset + CHUNK])
                last = run.ended[fd] and offset + len(chunk) >= len(run.output[fd])
            if box.result is not None and not chunk:
                raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id} not found")
            if chunk:
                await stream.send_message(tcr.TaskExecStdioReadResponse(data=chunk))
                offset += len(chunk)
            if last:
                return

    @staticmethod
    def _exit(run: Exec, answer: type) -> Any:
        return answer(code=run.code) if run.code >= 0 else answer(signal=-run.code)

    async def TaskExecWait(self, stream: Any) -> None:
        request, box = await self._request(stream, "exec_wait")
        run = self._exec(box, request.exec_id)
        async with run.changed:
            try:
                await asyncio.wait_for(run.changed.wait_for(
                    lambda: run.code is not None or box.result is not None), WAIT_ATTEMPT)
            except asyncio.TimeoutError:
                raise GRPCError(Status.DEADLINE_EXCEEDED, "still running") from None
        if box.result is not None:  # the sandbox ended under it
            raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id} not found")
        await stream.send_message(self._exit(run, tcr.TaskExecWaitResponse))

    async def TaskExecPoll(self, stream: Any) -> None:
        request, box = await self._request(stream, "exec_poll")
        run = self._exec(box, request.exec_id)
        answer = tcr.TaskExecPollResponse() if run.code is None else \
            self._exit(run, tcr.TaskExecPollResponse)
        await stream.send_message(answer)

    async def TaskExecStdinWrite(self, stream: Any) -> None:
        request, box = await self._request(stream, "stdin")
        run = self._exec(box, request.exec_id)
        await run.write_stdin(request.offset, request.data, request.eof)
        await stream.send_message(tcr.TaskExecStdinWriteResponse())

    async def TaskExecStdinStatus(self, stream: Any) -> None:
        request, box = await self._request(stream, "stdin")
        run = self._exec(box, request.exec_id)
        await stream.send_message(tcr.TaskExecStdinStatusResponse(
            num_bytes_written=run.stdin_written, closed=run.stdin_closed))
