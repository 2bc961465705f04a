"""A local server speaking Modal's gRPC API to the real ``modal`` client, executing commands
for real.

One address (``MODAL_SERVER_URL``, plain HTTP/2 on 127.0.0.1: the client accepts a router
without TLS only on a loopback server) serves both of Modal's services: the control plane
(``api``: apps, images, sandboxes) and the task command router (``router``: a command's start,
input, output and exit). A sandbox is a container as the local Daytona server makes them (its
own namespaces, memory and disk; no network with ``block_network``) whose user is root, as in
Modal's; it ends at its ``timeout`` (TIMEOUT), when terminated (TERMINATED), or when a fault
makes it vanish. Faults, by call name (``create``, ``wait``, ``terminate``, ``list``,
``task``, ``access``, ``auth``; the router's ``exec``, ``read``, ``stdin``, ``exec_wait``), as
the Daytona server's: a status (an HTTP code, answered as the gRPC status Modal's servers give
for it), a hung call, a dropped stream (RST_STREAM), and ``vanish``: the sandbox is gone
while its command runs.

Example:
    server = ModalTestServer().start()
    os.environ.update(server.environ())    # MODAL_SERVER_URL, MODAL_TOKEN_ID, MODAL_TOKEN_SECRET
    sb = modal.Sandbox.create(app=modal.App.lookup("x", create_if_missing=True))
    sb.exec("id", "-un").stdout.read()     # 'root\\n'
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from daytona_server.faults import Faults
from daytona_server.replay import Replays
from grpclib import GRPCError, Status
from grpclib.server import Server
from modal_proto import api_pb2

from .api import ControlPlane, jwt
from .box import ModalBox, modal_id
from .router import Router

# The gRPC status Modal's servers answer for what an HTTP status says.
GRPC_FOR_HTTP = {400: Status.INVALID_ARGUMENT, 401: Status.UNAUTHENTICATED,
                 403: Status.PERMISSION_DENIED, 404: Status.NOT_FOUND,
                 409: Status.FAILED_PRECONDITION, 429: Status.RESOURCE_EXHAUSTED,
                 500: Status.INTERNAL, 502: Status.UNAVAILABLE, 503: Status.UNAVAILABLE,
                 504: Status.DEADLINE_EXCEEDED}
Ended = api_pb2.GenericResult


class ModalTestServer:
    """The server; ``start()`` serves on a thread of its own, ``environ()`` points the client."""

    def __init__(self, token_id: str = "ak-deepgym-test", token_secret: str = "as-deepgym-test",
                 host: str = "127.0.0.1", replay: bool = False) -> None:
        self.token_id, self.token_secret, self.host = token_id, token_secret, host
        # Bench mode (see daytona_server.replay): a judge run seen before is answered from
        # its first run's output, so that this machine's CPU does not stand in for the cloud's.
        self.replays = Replays() if replay else None
        self.faults = Faults()
        self.boxes: dict[str, ModalBox] = {}
        self.by_task: dict[str, ModalBox] = {}
        self.apps: dict[str, str] = {}
        self.images: dict[str, str] = {}
        self.auth_tokens: set[str] = set()
        self.environment_id = modal_id("en")
        self.root = Path(tempfile.mkdtemp(prefix="modal-test-server-"))
        with socket.socket() as sock:
            sock.bind((host, 0))
            self.port = sock.getsockname()[1]
        self._pool = ThreadPoolExecutor(256)  # container starts and stops, hung calls
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def provider_options(self) -> dict[str, str]:
        """The provider's options that point it here."""
        return {"token_id": self.token_id, "token_secret": self.token_secret,
                "server_url": self.url}

    def environ(self) -> dict[str, str]:
        return {"MODAL_SERVER_URL": self.url, "MODAL_TOKEN_ID": self.token_id,
                "MODAL_TOKEN_SECRET": self.token_secret}

    # --- the server's own thread ------------------------------------------------------------

    def start(self) -> ModalTestServer:
        ready = threading.Event()
        failed: list[BaseException] = []

        async def serve() -> None:
            self._stopped = asyncio.Event()
            server = Server([ControlPlane(self), Router(self)])
            try:
                await server.start(self.host, self.port)
            except BaseException as exc:  # noqa: B036 - told to start()
                failed.append(exc)
                ready.set()
                return
            expiry = asyncio.ensure_future(self._expire_forever())
            ready.set()
            await self._stopped.wait()
            expiry.cancel()
            server.close()
            await server.wait_closed()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.set_default_executor(self._pool)
            self._loop.run_until_complete(serve())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="modal-test-server")
        self._thread.start()
        ready.wait()
        if failed:
            raise failed[0]
        return self

    def stop(self) -> None:
        self.faults.release.set()
        for box in list(self.boxes.values()):
            self.call(self.end(box, Ended.GENERIC_STATUS_TERMINATED))
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def call(self, coroutine: Any, timeout: float = 30) -> Any:
        """Run ``coroutine`` on the server's loop from another thread; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def blocking(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    # --- sandboxes --------------------------------------------------------------------------

    def add(self, box: ModalBox) -> None:
        box.router_jwt = jwt(box.task_id)
        self.boxes[box.id] = box
        self.by_task[box.task_id] = box

    def router_access(self, box: ModalBox) -> api_pb2.CommandRouterAccess:
        return api_pb2.CommandRouterAccess(url=self.url, jwt=box.router_jwt)

    async def end(self, box: ModalBox, status: int, forget: bool = False) -> None:
        """End ``box`` with ``status`` (its commands killed, its container stopped);
        ``forget``: and it is gone, as if it never was (NOT_FOUND from then on)."""
        if forget:
            self.boxes.pop(box.id, None)
            self.by_task.pop(box.task_id, None)
        if box.end(status):
            for run in box.execs.values():  # wake whoever waits on its commands
                async with run.changed:
                    run.changed.notify_all()
            await self.blocking(box.container.stop)

    def live_sandboxes(self) -> list[str]:
        return sorted(sid for sid, box in list(self.boxes.items()) if box.result is None)

    def kill(self, sid: str) -> bool:
        """The sandbox ``sid`` terminated from outside (another client, Modal's console)."""
        box = self.boxes.get(sid)
        if box is not None:
            self.call(self.end(box, Ended.GENERIC_STATUS_TERMINATED))
        return box is not None

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            for box in [b for b in list(self.boxes.values())
                        if b.result is None and b.end_at <= now]:
                asyncio.ensure_future(self.end(box, Ended.GENERIC_STATUS_TIMEOUT))

    # --- faults -----------------------------------------------------------------------------

    async def fault(self, call: str, stream: Any, box: ModalBox | None = None) -> None:
        """Wait the call's latency, if any; then carry out the fault table's rule for
        ``call``, if one fires: raise its status, hang till released, drop the stream, or
        (``vanish``) make the sandbox go away and let the call through: the command it
        starts is never heard of again."""
        delay = self.faults.delay_for(call)
        if delay:
            await asyncio.sleep(delay)
        rule = self.faults.pick(call)
        if rule is None:
            return
        if rule.action == "status":
            raise GRPCError(GRPC_FOR_HTTP.get(rule.status, Status.UNKNOWN),
                            f"injected {rule.status}")
        if rule.action == "hang":
            await self.blocking(self.faults.release.wait)
            raise GRPCError(Status.UNAVAILABLE, "released")
        if rule.action == "drop":
            await stream.cancel()  # RST_STREAM; the error after it goes nowhere
            raise GRPCError(Status.CANCELLED, "injected: the stream drops")
        if rule.action == "vanish" and box is not None:  # the call is answered; then no more
            await self.end(box, Ended.GENERIC_STATUS_TERMINATED, forget=True)
