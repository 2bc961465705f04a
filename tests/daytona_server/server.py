"""A local server speaking the part of Daytona's REST and toolbox API that the SDK uses for
deepgym_ray's Daytona provider, executing commands for real on this machine.

Request bodies are parsed and responses built with the SDK's own generated models
(``daytona_api_client``, ``daytona_toolbox_api_client``), so the wire format is the real one.
Run as root, each sandbox is a container as far as this machine allows (see ``container``: its
own namespaces, its declared memory and disk enforced, home ``/root``), as in Daytona's cloud;
``privileged=False`` makes it an unprivileged one, and ``user`` (other than root) gives it a
user of its own, as Daytona's default images do: commands run, and uploads are written, as
that user, which has the real ``sudo`` as ``sudo`` says (``"nopasswd"``, ``"password"``; see
``users``). Otherwise (or with ``contain=False``) a sandbox is a home directory here (mode
0711, so a solution's uid can reach its own directory inside). Either way commands run in
their own process group (as this process's user, but for a container's own user), killed when
the sandbox is stopped or deleted: a session's in the session's long-lived shell, through the
daemon's log files with their framing (``sessions``); ``process.exec``'s as the service runs
them (``process``). Uploads answer per file (``uploads``); creation is throttled as
configured (``limits``). Faults are injected on demand
(see ``faults``). Every response goes out in one write: headers and body in two sends cost a
delayed-ACK stall (~40 ms) per call.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from daytona_api_client import CreateSandbox, ListSandboxesResponse, SandboxState, ToolboxProxyUrl
from daytona_api_client import Sandbox as SandboxDto
from daytona_toolbox_api_client import (
    CreateSessionRequest,
    ExecuteRequest,
    Session,
    SessionExecuteRequest,
    SessionExecuteResponse,
    UserHomeDirResponse,
)

from . import container
from .box import Box, HttpError
from .daemon import InnerDaemon
from .faults import Faults, hold_or_drop
from .lifecycle import Lifecycle, stop_box
from .limits import Limits
from .process import environ, execute
from .replay import Replays
from .sessions import Session as ShellSession
from .uploads import bulk_upload
from .users import SandboxUser, sudo_missing

_ROUTES = [
    ("POST", r"/api/sandbox", "create"),
    ("GET", r"/api/sandbox", "list"),
    ("GET", r"/api/sandbox/(?P<sid>[^/]+)", "get"),
    ("DELETE", r"/api/sandbox/(?P<sid>[^/]+)", "delete"),
    ("POST", r"/api/sandbox/(?P<sid>[^/]+)/start", "start"),
    ("POST", r"/api/sandbox/(?P<sid>[^/]+)/stop", "stop"),
    ("POST", r"/api/sandbox/(?P<sid>[^/]+)/autostop/(?P<n>-?\d+)", "autostop"),
    ("POST", r"/api/sandbox/(?P<sid>[^/]+)/autodelete/(?P<n>-?\d+)", "autodelete"),
    ("GET", r"/api/sandbox/(?P<sid>[^/]+)/toolbox-proxy-url", "proxy_url"),
    ("GET", r"/toolbox/(?P<sid>[^/]+)/user-home-dir", "home_dir"),
    ("POST", r"/toolbox/(?P<sid>[^/]+)/files/bulk-upload", "upload"),
    ("POST", r"/toolbox/(?P<sid>[^/]+)/process/execute", "execute"),
    ("POST", r"/toolbox/(?P<sid>[^/]+)/process/session", "session"),
    ("GET", r"/toolbox/(?P<sid>[^/]+)/process/session/(?P<ses>[^/]+)", "session_get"),
    ("DELETE", r"/toolbox/(?P<sid>[^/]+)/process/session/(?P<ses>[^/]+)", "session_delete"),
    ("POST", r"/toolbox/(?P<sid>[^/]+)/process/session/(?P<ses>[^/]+)/exec", "session_exec"),
    ("GET", r"/toolbox/(?P<sid>[^/]+)/process/session/(?P<ses>[^/]+)/command/(?P<cmd>[^/]+)/logs",
     "session_logs"),
]
_COMPILED = [(m, re.compile(p + r"/?$"), name) for m, p, name in _ROUTES]


class DaytonaTestServer:
    """The server. ``start()`` serves on a thread; ``url`` is what DAYTONA_API_URL takes."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str = "test-key",
                 user: str | None = "default", replay: bool = False,
                 contain: bool | None = None,
                 privileged: bool = True, sudo: str | None = None,
                 limits: Limits | None = None, minute: float = 60.0) -> None:
        self.api_key = api_key
        self.limits = limits or Limits()
        self.lifecycle = Lifecycle(self, minute)
        why = container.available()
        if contain and why:
            raise RuntimeError(f"sandboxes cannot be containers here: {why}")
        self.contain = why is None if contain is None else contain
        self.privileged = privileged
        # A sandbox user other than root (in a container): commands run as a uid of its own,
        # with the real sudo as ``sudo`` says (see ``users``).
        self.sandbox_user: SandboxUser | None = None
        if user == "default":  # as Daytona's default images: ``daytona``, passwordless sudo
            can = self.contain and sudo is None and not sudo_missing()
            user, sudo = ("daytona", "nopasswd") if can else (None, sudo)
        if user not in (None, "root") and self.contain:
            if sudo is not None and sudo_missing():
                raise RuntimeError(f"sandbox users cannot have sudo here: {sudo_missing()}")
            self.sandbox_user = SandboxUser.make(user, sudo=sudo)
        elif sudo is not None:
            raise RuntimeError("sudo needs a sandbox user other than root, in a container")
        # Bench mode: a judge run whose files were seen before is answered from the first
        # real run's output (re-tagged with this run's token) instead of executed again, so
        # this machine's CPU does not stand in for the cloud's.
        self.replay = replay
        self.replays = Replays()
        self.faults = Faults()
        self.user = user or ("root" if os.geteuid() == 0 else "daytona")
        self.root = Path(tempfile.mkdtemp(prefix="daytona-test-server-"))
        self.root.chmod(0o711)
        self.boxes: dict[str, Box] = {}
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = _HTTPServer((host, port), handler)
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/api"

    def provider_options(self) -> dict[str, str]:
        """The provider's options that point it here."""
        return {"api_key": self.api_key, "api_url": self.url}

    def start(self) -> DaytonaTestServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="daytona-test-server")
        self._thread.start()
        self.lifecycle.start()
        return self

    def stop(self) -> None:
        self.lifecycle.close()
        self.faults.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            boxes = list(self.boxes.values())
            self.boxes.clear()
        for box in boxes:
            box.kill_all()
        shutil.rmtree(self.root, ignore_errors=True)

    def live_sandboxes(self) -> list[str]:
        with self.lock:
            return [b.id for b in self.boxes.values() if b.state != SandboxState.DESTROYED]

    def vanish(self, sid: str) -> None:
        """The sandbox disappears: processes killed, files gone, later calls get 404."""
        with self.lock:
            box = self.boxes.pop(sid, None)
        if box is not None:
            box.state = SandboxState.DESTROYED
            box.kill_all()
            shutil.rmtree(box.host_dir, ignore_errors=True)

    # --- the API -----------------------------------------------------------------------------

    def dto(self, box: Box) -> SandboxDto:
        req = box.request
        return SandboxDto(
            id=box.id, organization_id="org-test", name=req.name or box.id,
            snapshot=req.snapshot, user=self.user, env=req.env or {}, labels=req.labels or {},
            public=bool(req.public), network_block_all=bool(req.network_block_all), kvm=False,
            target=req.target or "local", cpu=req.cpu or 1, gpu=0, memory=req.memory or 1,
            disk=req.disk or 3, state=box.state, auto_stop_interval=box.auto_stop,
            auto_delete_interval=box.auto_delete, created_at=box.created,
            updated_at=box.created,
            toolbox_proxy_url=f"http://{self.host}:{self.port}/toolbox",
        )

    def box(self, sid: str) -> Box:
        with self.lock:
            box = self.boxes.get(sid)
        if box is None or box.state == SandboxState.DESTROYED:
            raise HttpError(404, f"Sandbox with ID or name {sid} not found")
        return box

    def create(self, body: bytes) -> dict:
        request = CreateSandbox.from_json(body.decode())
        with self.lock:
            in_use = sum(b.request.cpu or 1 for b in self.boxes.values()
                         if b.state == SandboxState.STARTED)
        self.limits.check_create(in_use, request.cpu or 1)
        sid = uuid.uuid4().hex[:16]
        try:
            box = Box(sid, request, self.root, self.contain, self.privileged,
                       self.sandbox_user)
        except OSError as exc:
            raise HttpError(500, f"cannot start the sandbox: {exc}") from exc
        self.start_daemon(box)
        with self.lock:
            self.boxes[sid] = box
        return self.dto(box).to_dict()

    def start_daemon(self, box: Box) -> None:
        """Serve the toolbox inside a contained sandbox with a network of its own, as Daytona's
        daemon does (no key asked; see ``daemon``)."""
        if box.container is not None and box.request.network_block_all:
            handler = type("InnerHandler", (_Handler,), {"server_ref": self, "inner": box.id})
            box.daemon = InnerDaemon(handler, box.container.pid)

    environ = staticmethod(environ)

    def handle(self, call: str, params: dict, body: bytes, content_type: str) -> tuple[int, object]:
        if call == "create":
            return 200, self.create(body)
        if call == "list":  # no sandbox listing needed on these paths: an empty page
            return 200, ListSandboxesResponse(items=[], next_cursor=None).to_dict()
        box = self.box(params["sid"])
        if call == "get":
            return 200, self.dto(box).to_dict()
        if call == "delete":
            self.vanish(box.id)
            box.state = SandboxState.DESTROYED
            return 200, self.dto(box).to_dict()
        if call in ("start", "stop"):
            if call == "stop":
                stop_box(box)
            else:
                self.lifecycle.start_box(box)
            return 200, self.dto(box).to_dict()
        if call in ("autostop", "autodelete"):
            setattr(box, "auto_stop" if call == "autostop" else "auto_delete", int(params["n"]))
            return 200, self.dto(box).to_dict()
        if call == "proxy_url":
            return 200, ToolboxProxyUrl(url=f"http://{self.host}:{self.port}/toolbox").to_dict()
        if box.state != SandboxState.STARTED:  # the rest are the toolbox's calls
            raise HttpError(409, f"Sandbox {box.id} is not started (state {box.state.value})")
        with box.in_call():  # activity, from its start to its end
            return self._toolbox(box, call, params, body, content_type)

    def _toolbox(self, box: Box, call: str, params: dict, body: bytes,
                 content_type: str) -> tuple[int, object]:
        if call == "home_dir":
            return 200, UserHomeDirResponse(dir=box.home).to_dict()
        if call == "upload":
            return bulk_upload(box, content_type, body, self.replay)
        if call == "execute":
            vanish = (lambda: self.vanish(box.id)) if params.get("vanish") else None
            return 200, execute(box, ExecuteRequest.from_json(body.decode()),
                                self.replays if self.replay else None, vanish).to_dict()
        if call == "session":
            session_id = CreateSessionRequest.from_json(body.decode()).session_id
            if session_id in box.sessions:
                raise HttpError(409, "session already exists")
            box.sessions[session_id] = ShellSession.start(box, session_id, self.environ(box))
            return 201, None
        session = box.sessions.get(params.get("ses"))
        if session is None:
            raise HttpError(404, "session not found")
        if call == "session_get":
            return 200, Session(session_id=params["ses"], commands=[]).to_dict()
        if call == "session_delete":
            box.sessions.pop(params["ses"]).close()
            return 204, None
        if call == "session_logs":
            out, err = session.read_log(params["cmd"])
            return 200, {"output": (out + err).decode("utf-8", "replace"),
                         "stdout": out.decode("utf-8", "replace"),
                         "stderr": err.decode("utf-8", "replace")}
        req = SessionExecuteRequest.from_json(body.decode())
        box.write(box.uploaded)
        box.uploaded = []
        vanish = (lambda: self.vanish(box.id)) if params.get("vanish") else None
        cmd_id, code, out, err = session.execute(req.command, written=vanish)
        return 200, SessionExecuteResponse(
            cmd_id=cmd_id, output=(out + err).decode("utf-8", "replace"),
            stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
            exit_code=code).to_dict()


class _HTTPServer(ThreadingHTTPServer):
    # A class attribute: the listen backlog is set when the socket is bound, in __init__ (the
    # default of 5 overflows at once under hundreds of new connections: SYNs dropped, resends
    # after a second, connections reset).
    request_queue_size = 4096
    daemon_threads = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_ref: DaytonaTestServer
    inner: str | None = None  # the daemon inside this sandbox: toolbox routes, no key, no faults

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        pass

    def _route(self) -> tuple[str, dict] | None:
        path = self.path.split("?", 1)[0]
        if self.inner is not None:
            path = f"/toolbox/{self.inner}{path}"
        for method, pattern, name in _COMPILED:
            match = pattern.match(path)
            if method == self.command and match:
                return name, match.groupdict()
        return None

    def _reply(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        body = b"" if payload is None else json.dumps(payload).encode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\n{extra}"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.wfile.write(head.encode() + body)  # one send: no delayed-ACK stall

    def _serve(self) -> None:
        server = self.server_ref
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        route = self._route()
        if route is None:
            return self._reply(404, {"statusCode": 404, "message": f"no route {self.path}"})
        call, params = route
        if self.inner is not None:
            return self._handle(server, call, params, body)
        with server.lock:
            server.calls[call] = server.calls.get(call, 0) + 1
        delay = server.faults.delay_for(call)
        if delay:
            time.sleep(delay)
        if self.headers.get("Authorization") != f"Bearer {server.api_key}":
            return self._reply(401, {"statusCode": 401, "message": "Invalid API key"})
        rule = server.faults.pick(call)
        if rule is not None and rule.action == "status":
            return self._reply(rule.status, {"statusCode": rule.status,
                                             "message": f"injected {rule.status}"})
        if hold_or_drop(rule, server.faults, self):
            return None
        if rule is not None and rule.action == "vanish":
            params[rule.action] = True
        return self._handle(server, call, params, body)

    def _handle(self, server: DaytonaTestServer, call: str, params: dict, body: bytes) -> None:
        try:
            status, payload = server.handle(call, params, body,
                                            self.headers.get("Content-Type", ""))
        except HttpError as exc:  # the fields the toolbox's ErrorResponse requires, too
            return self._reply(exc.status, {
                "statusCode": exc.status, "message": exc.message, "path": self.path,
                "method": self.command, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ")},
                exc.headers)
        except ValueError as exc:  # a body the generated models refuse: the wire format is off
            return self._reply(400, {"statusCode": 400, "message": f"bad request: {exc}"})
        return self._reply(status, payload)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve
