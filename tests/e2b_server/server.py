"""A local server speaking E2B's API to the real ``e2b`` SDK, executing commands for real.

Two addresses, as in E2B's cloud: the control plane (``E2B_API_URL``; REST, the ``X-API-Key``
header) makes, describes, extends and kills sandboxes, with the request and response bodies of
the SDK's own generated models (``e2b.api.client.models``); each sandbox's daemon (``envd``,
see ``envd``) runs its commands and moves its files, one address for all of them
(``E2B_SANDBOX_URL``, served by uvicorn). A sandbox is a container as the local Daytona
server makes them (its own namespaces, memory and disk; no network unless internet access is
allowed) whose user is ``user`` with passwordless sudo, as in E2B's base template; a call may
act as ``root``. A sandbox lives for the ``timeout`` it was made with (extended by
``/timeout``): then it is killed and gone, and the daemon answers for it no more. Faults, by
call name (``create``, ``list``, ``get``, ``kill``, ``timeout``; the daemon's ``process``, a
command's start, and ``files``), as the Daytona server's: an HTTP status, a hung call, a
dropped connection (a command's after it started), a sandbox that vanishes mid-command.

Example:
    server = E2BTestServer().start()
    os.environ.update(server.environ())     # E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL
    e2b.Sandbox.create(timeout=60).commands.run("id -un").stdout   # 'user\\n'
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import tempfile
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from daytona_server.faults import Faults, hold_or_drop
from daytona_server.replay import Replays
from e2b.api.client.models import NewSandboxV2, Sandbox

from .box import ENVD_VERSION, E2BBox
from .envd import EnvdApp

_ROUTES = [("POST", r"/v2/sandboxes", "create"), ("GET", r"/v2/sandboxes", "list"),
           ("GET", r"/sandboxes/(?P<sid>[^/]+)", "get"),
           ("DELETE", r"/sandboxes/(?P<sid>[^/]+)", "kill"),
           ("POST", r"/sandboxes/(?P<sid>[^/]+)/timeout", "timeout")]
_COMPILED = [(m, re.compile(p + r"/?$"), name) for m, p, name in _ROUTES]


class E2BTestServer:
    """The server; ``start()`` serves both planes on threads, ``environ()`` points the SDK."""

    def __init__(self, api_key: str = "e2b_test_key", host: str = "127.0.0.1",
                 replay: bool = False) -> None:
        self.api_key = api_key
        # Bench mode (see daytona_server.replay): a judge run seen before is answered from
        # its first run's output, so that this machine's CPU does not stand in for the cloud's.
        self.replays = Replays() if replay else None
        self.faults = Faults()
        self.boxes: dict[str, E2BBox] = {}
        self.lock = threading.Lock()
        self.root = Path(tempfile.mkdtemp(prefix="e2b-test-server-"))
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = ThreadingHTTPServer((host, 0), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._envd = None
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def sandbox_url(self) -> str:
        return f"http://{self.host}:{self.envd_port}"

    def provider_options(self) -> dict[str, str]:
        """The provider's options that point it here."""
        return {"api_key": self.api_key, "api_url": self.api_url,
                "sandbox_url": self.sandbox_url}

    def environ(self) -> dict[str, str]:
        return {"E2B_API_KEY": self.api_key, "E2B_API_URL": self.api_url,
                "E2B_SANDBOX_URL": self.sandbox_url}

    def start(self) -> E2BTestServer:
        import uvicorn

        sock = socket.socket()
        sock.bind((self.host, 0))
        self.envd_port = sock.getsockname()[1]
        config = uvicorn.Config(EnvdApp(self), log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        self._envd = uvicorn.Server(config)
        self._envd.install_signal_handlers = lambda: None  # not the main thread
        for target, args in ((self.httpd.serve_forever, ()), (self._envd.run, ([sock],)),
                             (self._expire_forever, ())):
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            self._threads.append(thread)
        while not self._envd.started:
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._closing.set()
        self.faults.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._envd is not None:
            self._envd.should_exit = True
        with self.lock:
            boxes, self.boxes = list(self.boxes.values()), {}
        for box in boxes:
            box.kill()
        for thread in self._threads:
            thread.join(10)
        shutil.rmtree(self.root, ignore_errors=True)

    def live_sandboxes(self) -> list[str]:
        with self.lock:
            return sorted(self.boxes)

    # --- lifetimes --------------------------------------------------------------------------

    def kill(self, sid: str) -> bool:
        with self.lock:
            box = self.boxes.pop(sid, None)
        if box is not None:
            box.kill()
        return box is not None

    def _expire_forever(self) -> None:
        while not self._closing.wait(0.1):
            now = time.monotonic()
            with self.lock:
                ended = [sid for sid, box in self.boxes.items() if box.end_at <= now]
            for sid in ended:
                self.kill(sid)

    # --- the control plane ------------------------------------------------------------------

    def handle(self, call: str, params: dict, body: bytes) -> tuple[int, object]:
        if call == "create":
            request = NewSandboxV2.from_dict(json.loads(body or b"{}"))
            timeout = request.timeout if isinstance(request.timeout, int) else 300
            allow = request.allow_internet_access
            box = E2BBox(request.template_id, timeout,
                         _as_dict(request.metadata), _as_dict(request.env_vars),
                         allow if isinstance(allow, bool) else True, self.root)
            with self.lock:
                self.boxes[box.id] = box
            return 201, Sandbox(template_id=box.template, sandbox_id=box.id, client_id="local",
                                envd_version=ENVD_VERSION,
                                envd_access_token=box.access_token).to_dict()
        if call == "list":  # one page, every sandbox: what the provider's key check reads
            with self.lock:
                return 200, [{k: v for k, v in box.detail().items()
                              if k != "allowInternetAccess"} for box in self.boxes.values()]
        with self.lock:
            box = self.boxes.get(params["sid"])
        if box is None:
            return 404, {"code": 404, "message": f"sandbox \"{params['sid']}\" doesn't exist "
                                                 "or you don't have access to it"}
        if call == "get":
            return 200, box.detail()
        if call == "kill":
            self.kill(box.id)
            return 204, None
        box.end_at = time.monotonic() + int(json.loads(body or b"{}").get("timeout", 0))
        return 204, None

    # --- the daemon's files -----------------------------------------------------------------

    def envd_box(self, sid: str | None, token: str | None) -> tuple[E2BBox | None, str]:
        """The sandbox a daemon call is for, or None and why (``gone``, or the token)."""
        with self.lock:
            box = self.boxes.get(sid or "")
        if box is None:
            return None, "gone"
        if token != box.access_token:
            return None, "invalid access token"
        return box, ""

    @staticmethod
    def parse_upload(content_type: str, body: bytes, query: dict) -> list[tuple[str, bytes]]:
        if not content_type.startswith("multipart/"):
            return [(query.get("path", ""), body)]
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        return [(part.get_filename() or query.get("path", ""), part.get_payload(decode=True))
                for part in message.iter_parts()]

    @staticmethod
    def write_files(box: E2BBox, files: list[tuple[str, bytes]],
                    user: str) -> tuple[int, object]:
        """Written as ``user``, each in its place; envd's answer: the entries written."""
        script = ("import json,os,sys\nout=[]\nfor p,d in json.load(sys.stdin):\n"
                  " os.makedirs(os.path.dirname(p) or '.',exist_ok=True)\n"
                  " open(p,'wb').write(d.encode('latin-1'))\n"
                  " out.append({'name':os.path.basename(p),'type':'file','path':p})\n"
                  "print(json.dumps(out))\n")
        paths = [[box.path(p, user), data.decode("latin-1")] for p, data in files]
        proc = box.popen(["python3", "-I", "-S", "-c", script], {}, None, user, True)
        out, err = proc.communicate(json.dumps(paths).encode())
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:]
            status = 403 if "Permission denied" in " ".join(tail) else 500
            return status, {"code": status, "message": " ".join(tail) or "write failed"}
        return 200, json.loads(out)

    @staticmethod
    def read_file(box: E2BBox, path: str, user: str) -> tuple[int, object]:
        proc = box.popen(["cat", "--", box.path(path, user)], {}, None, user, False)
        out, err = proc.communicate()
        if proc.returncode != 0:
            return 404, {"code": 404, "message": err.decode("utf-8", "replace").strip()}
        return 200, out


def _as_dict(value: object) -> dict:
    """A request's map (a dict, or a model's ``additional_properties``; unset: empty)."""
    if isinstance(value, dict):
        return dict(value)
    return dict(getattr(value, "additional_properties", None) or {})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_ref: E2BTestServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        pass

    def _reply(self, status: int, payload: object) -> None:
        body = b"" if payload is None else json.dumps(payload).encode()
        head = (f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.wfile.write(head.encode() + body)

    def _serve(self) -> None:
        server = self.server_ref
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        route = next(((name, m.groupdict()) for method, m, name in
                      ((meth, pat.match(path), n) for meth, pat, n in _COMPILED)
                      if m and method == self.command), None)
        if route is None:
            return self._reply(404, {"code": 404, "message": f"no route {self.path}"})
        if self.headers.get("X-API-Key") != server.api_key:
            return self._reply(401, {"code": 401, "message": "Invalid API key"})
        call, params = route
        delay = server.faults.delay_for(call)
        if delay:
            time.sleep(delay)
        rule = server.faults.pick(call)
        if rule is not None and rule.action == "status":
            return self._reply(rule.status, {"code": rule.status,
                                             "message": f"injected {rule.status}"})
        if hold_or_drop(rule, server.faults, self):
            return None
        try:
            status, payload = server.handle(call, params, body)
        except OSError as exc:
            status, payload = 500, {"code": 500, "message": f"cannot start the sandbox: {exc}"}
        return self._reply(status, payload)

    do_GET = do_POST = do_DELETE = _serve
