"""The in-sandbox daemon's API (``envd``), as the ``e2b`` SDK reaches it: the ``process.Process``
Connect service (JSON codec, a command's output streamed as it comes) built on the server
classes the wheel ships (``e2b.envd.process.process_connect``), and the plain HTTP routes
``/files`` (multipart or octet-stream uploads, downloads) and ``/health``.

One address serves every sandbox (``E2B_SANDBOX_URL``): a call names its sandbox in the
``E2b-Sandbox-Id`` header and proves it with the sandbox's ``X-Access-Token``; the user a
call acts as is the name in its ``Authorization: Basic`` header (``user`` when none). As in
envd's source (``services/process/start.go``), a command outlives its stream and is killed at
the call's ``Connect-Timeout-Ms``, when there is one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.process import process_pb
from e2b.envd.process.process_connect import ProcessASGIApplication
from protobuf import Oneof

from deepgym_ray.sandboxes.remote.command import SPEC_FILE, SPEC_VARIABLE

from .box import USER, E2BBox

if TYPE_CHECKING:
    from .server import E2BTestServer

Event = process_pb.ProcessEvent
KEEPALIVE_SECONDS = 5.0


def _username(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    if auth.startswith("Basic "):
        name = base64.b64decode(auth[6:]).decode("utf-8", "replace").split(":", 1)[0]
        return name or USER
    return USER


class ProcessService:
    """``process.Process``: Start (streamed), SendSignal, SendInput, CloseStdin, List."""

    def __init__(self, server: E2BTestServer) -> None:
        self.server = server

    def _box(self, ctx: Any) -> E2BBox:
        headers = {k.lower(): v for k, v in ctx.request_headers.items()}
        box, why = self.server.envd_box(headers.get("e2b-sandbox-id"),
                                        headers.get("x-access-token"))
        if box is None:
            raise ConnectError(Code.NOT_FOUND if why == "gone" else Code.UNAUTHENTICATED, why)
        return box

    async def start(self, request: process_pb.StartRequest, ctx: Any):
        box = self._box(ctx)
        headers = {k.lower(): v for k, v in ctx.request_headers.items()}
        config = request.process
        replays, key = self.server.replays, None
        spec, box.pending_spec = config.envs.get(SPEC_VARIABLE, "").encode() \
            or box.pending_spec, None  # in the command's environment, or uploaded before it
        if replays is not None and spec:
            key = replays.key([(SPEC_FILE, spec)])
            answer = replays.answer(key)
            if answer is not None:
                async for event in _replayed(*answer):
                    yield event
                return
        seen: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        proc = box.popen([config.cmd, *config.args], dict(config.envs), config.cwd or None,
                         _username(headers), bool(request.stdin))
        box.procs[proc.pid] = proc
        loop = asyncio.get_running_loop()
        # As envd does: the command outlives its stream (a caller that goes away does not end
        # it), and the call's Connect timeout, when it has one, is the command's own.
        loop.run_in_executor(None, _reap, box, proc)
        if ctx.timeout_ms is not None:
            loop.call_later(ctx.timeout_ms / 1000, _kill, proc)
        yield process_pb.StartResponse(event=Event(event=Oneof(
            "start", Event.StartEvent(pid=proc.pid))))
        queue: asyncio.Queue = asyncio.Queue()

        def pump(stream: Any, field: str) -> None:
            for chunk in iter(lambda: stream.read1(65536), b""):
                loop.call_soon_threadsafe(queue.put_nowait, (field, chunk))
            loop.call_soon_threadsafe(queue.put_nowait, (field, None))

        readers = [loop.run_in_executor(None, pump, proc.stdout, "stdout"),
                   loop.run_in_executor(None, pump, proc.stderr, "stderr")]
        open_streams = 2
        while open_streams:
            try:
                field, chunk = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except asyncio.TimeoutError:
                yield process_pb.StartResponse(event=Event(event=Oneof(
                    "keepalive", Event.KeepAlive())))
                continue
            if chunk is None:
                open_streams -= 1
                continue
            if key is not None:  # kept only to be replayed
                seen[field].append(chunk)
            yield process_pb.StartResponse(event=Event(event=Oneof(
                "data", Event.DataEvent(output=Oneof(field, chunk)))))
        code = await loop.run_in_executor(None, proc.wait)
        await asyncio.gather(*readers)
        if key is not None:
            replays.remember(key, code, b"".join(seen["stdout"]), b"".join(seen["stderr"]))
        # As Go's os.ProcessState says it: "exit status N", or "signal: killed".
        status = f"exit status {code}" if code >= 0 else \
            "signal: killed" if code == -signal.SIGKILL else f"signal: {-code}"
        yield process_pb.StartResponse(event=Event(event=Oneof("end", Event.EndEvent(
            exit_code=code if code >= 0 else -1, exited=code >= 0, status=status,
            error=None if code >= 0 else status))))

    def _proc(self, box: E2BBox, selector: Any):
        pid = getattr(selector, "pid", None) if selector is not None else None
        proc = box.procs.get(pid or -1)
        if proc is None:
            raise ConnectError(Code.NOT_FOUND, f"process with pid {pid} not found")
        return proc

    async def send_signal(self, request: process_pb.SendSignalRequest, ctx: Any):
        proc = self._proc(self._box(ctx), request.process.selector.value
                          if request.process and request.process.selector else None)
        sig = signal.SIGKILL if request.signal == process_pb.Signal.SIGNAL_SIGKILL \
            else signal.SIGTERM
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        return process_pb.SendSignalResponse()

    async def send_input(self, request: process_pb.SendInputRequest, ctx: Any):
        proc = self._proc(self._box(ctx), request.process.selector.value
                          if request.process and request.process.selector else None)
        data = request.input.input.value if request.input and request.input.input else b""
        await asyncio.get_running_loop().run_in_executor(None, _write, proc, data)
        return process_pb.SendInputResponse()

    async def close_stdin(self, request: process_pb.CloseStdinRequest, ctx: Any):
        proc = self._proc(self._box(ctx), request.process.selector.value
                          if request.process and request.process.selector else None)
        if proc.stdin is not None:
            proc.stdin.close()
        return process_pb.CloseStdinResponse()

    def connect(self, request: Any, ctx: Any):
        raise ConnectError(Code.UNIMPLEMENTED, "not served by the test server")

    async def update(self, request: Any, ctx: Any):
        raise ConnectError(Code.UNIMPLEMENTED, "not served by the test server")

    async def stream_input(self, request: Any, ctx: Any):
        raise ConnectError(Code.UNIMPLEMENTED, "not served by the test server")

    async def list(self, request: process_pb.ListRequest, ctx: Any):
        box = self._box(ctx)
        return process_pb.ListResponse(processes=[
            process_pb.ProcessInfo(pid=pid, config=process_pb.ProcessConfig(
                cmd=str(proc.args[0]))) for pid, proc in box.procs.items()])


async def _replayed(code: int | None, stdout: bytes, stderr: bytes):
    """A replayed run's events: its start, its output, its end (as the first run ended)."""
    yield process_pb.StartResponse(event=Event(event=Oneof(
        "start", Event.StartEvent(pid=0))))
    for field, data in (("stdout", stdout), ("stderr", stderr)):
        if data:
            yield process_pb.StartResponse(event=Event(event=Oneof(
                "data", Event.DataEvent(output=Oneof(field, data)))))
    code = 0 if code is None else code
    yield process_pb.StartResponse(event=Event(event=Oneof("end", Event.EndEvent(
        exit_code=code, exited=True, status=f"exit status {code}"))))


def _reap(box: E2BBox, proc: Any) -> None:
    proc.wait()
    box.procs.pop(proc.pid, None)


def _kill(proc: Any) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _write(proc: Any, data: bytes) -> None:
    if proc.stdin is None:
        raise ConnectError(Code.FAILED_PRECONDITION, "the process was started without stdin")
    proc.stdin.write(data)
    proc.stdin.flush()


class EnvdApp:
    """The ASGI application: the Connect service, then ``/files`` and ``/health``."""

    def __init__(self, server: E2BTestServer) -> None:
        self.server = server
        self.process = ProcessASGIApplication(ProcessService(server))
        self._threads_set = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._threads_set:  # each command holds three of the loop's threads till it ends
            self._threads_set = True
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(512))
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        sid = headers.get("e2b-sandbox-id")
        box, why = self.server.envd_box(sid, headers.get("x-access-token"))
        if box is None and why == "gone":  # the edge proxy answers for a sandbox gone
            return await _reply(send, 502, {"sandboxId": sid, "code": 502,
                                            "message": f"The sandbox {sid} was not found"})
        call = "process" if path == "/process.Process/Start" else \
            "files" if path == "/files" else None
        delay = self.server.faults.delay_for(call) if call else 0.0
        if delay:
            await asyncio.sleep(delay)
        rule = self.server.faults.pick(call) if call else None
        if rule is not None and call == "files" and rule.action != "drop":
            body = await _read_body(receive)  # a server answers once it has the request
            receive = _replay(body)
        if rule is not None and rule.action == "status":
            return await _reply(send, rule.status, {"code": rule.status,
                                                    "message": f"injected {rule.status}"})
        if rule is not None and rule.action == "hang":
            await asyncio.get_running_loop().run_in_executor(None, self.server.faults.release.wait)
            return await _reply(send, 503, {"code": 503, "message": "released"})
        if rule is not None and call == "process":  # drop, or vanish: mid-command
            send = _breaking(send, lambda: rule.action == "vanish" and self.server.kill(sid))
        elif rule is not None:  # drop: the connection breaks before the answer
            send = _breaking(send, lambda: None, after=0)
        if path.startswith("/process.Process/"):
            if box is not None:  # a sandbox killed mid-command: its stream breaks
                send = _breaking(send, lambda: None, when=lambda: box.killed)
            return await self.process(scope, receive, send)
        if path not in ("/files", "/health"):
            return await _reply(send, 404, {"code": 404, "message": f"no route {path}"})
        if box is None or path == "/health":
            status = 204 if box is not None else 401
            return await _reply(send, status, None if box else {"code": status,
                                                                 "message": why})
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        body = await _read_body(receive)
        user = query.get("username") or _username(headers)
        if scope["method"] == "GET":
            status, payload = await asyncio.get_running_loop().run_in_executor(
                None, self.server.read_file, box, query.get("path", ""), user)
            return await _reply(send, status, payload, raw=status == 200)
        files = self.server.parse_upload(headers.get("content-type", ""), body, query)
        if self.server.replays is not None:  # an uploaded spec is the next command's
            box.pending_spec = next((data for path, data in files
                                     if path.rsplit("/", 1)[-1] == SPEC_FILE), None)
        status, payload = await asyncio.get_running_loop().run_in_executor(
            None, self.server.write_files, box, files, user)
        return await _reply(send, status, payload)


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _replay(body: bytes) -> Any:
    """A ``receive`` that gives ``body`` (already read) again."""
    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}
    return receive


class DroppedConnection(Exception):
    """Raised into the server to break a call's connection (uvicorn closes it)."""


def _breaking(send: Any, before_break: Any, after: int = 1, when: Any = None) -> Any:
    """``send`` that breaks the connection once ``after`` body messages went out (a command's
    stream after its start event; a file call before its answer), or, with ``when``, at the
    first body message once ``when()`` is true; ``before_break()`` first: the client sees the
    connection drop mid-call, as when a proxy or a sandbox goes away."""
    sent = 0

    async def wrapped(message: dict) -> None:
        nonlocal sent
        due = when() if when is not None else sent >= after
        if message["type"] == "http.response.body" and due:
            before_break()
            raise DroppedConnection("injected: the connection drops")
        if message["type"] == "http.response.body":
            sent += 1
        await send(message)
        if message["type"] == "http.response.start" and after == 0 and when is None:
            before_break()
            raise DroppedConnection("injected: the connection drops")

    return wrapped


async def _reply(send: Any, status: int, payload: Any, raw: bool = False) -> None:
    body = payload if raw else b"" if payload is None else json.dumps(payload).encode()
    kind = b"application/octet-stream" if raw else b"application/json"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
