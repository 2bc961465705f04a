"""Modal's control plane (``modal.client.ModalClient``), the calls a sandbox's life makes, on
the servicer base class the ``modal`` wheel ships (``modal_proto.api_grpc.ModalClientBase``).

Every call carries the token in ``x-modal-token-id`` and ``x-modal-token-secret`` (else
UNAUTHENTICATED, which the client does not retry); a V2 sandbox call carries the JWT of
``AuthTokenGet`` in ``x-modal-auth-token``. Calls the client does not make for a sandbox
answer UNIMPLEMENTED. As Modal's own: ``SandboxWait`` is a long poll (its ``timeout``, at
most 10 s, then an empty result); ``SandboxList`` pages by ``before_timestamp``, newest first,
to an empty page; a finished sandbox's task id is its result (the client would poll forever
on an empty answer); an unknown sandbox is NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import TYPE_CHECKING, Any

from grpclib import GRPCError, Status
from modal_proto import api_pb2
from modal_proto.api_grpc import ModalClientBase

from .box import ModalBox, modal_id

if TYPE_CHECKING:
    from .server import ModalTestServer

IMAGE_BUILDER_VERSION = "2025.06"
LONG_POLL_MAX = 10.0


def jwt(subject: str, seconds: int = 3600) -> str:
    """A JWT-shaped token (the client reads its ``exp`` to refresh it; nothing checks the
    signature here)."""
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'HS256'})}.{part({'sub': subject, 'exp': int(time.time()) + seconds})}.x"


def unimplemented_elsewhere(cls: type) -> type:
    """``cls`` with every abstract call of its base it does not define answering
    UNIMPLEMENTED (grpclib maps all of a service's calls to the servicer's methods)."""
    async def unimplemented(self: Any, stream: Any) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, "not served by the test server")

    for name in getattr(cls, "__abstractmethods__", ()):
        setattr(cls, name, unimplemented)
    cls.__abstractmethods__ = frozenset()
    return cls


@unimplemented_elsewhere
class ControlPlane(ModalClientBase):
    """The control plane's calls for apps, images and sandboxes."""

    def __init__(self, server: ModalTestServer) -> None:
        self.server = server

    async def _request(self, stream: Any, call: str, sandbox: bool = False) -> Any:
        """The call's request, once its token (and a sandbox call's JWT) are right and the
        fault table had its say."""
        request = await stream.recv_message()
        md = stream.metadata
        if (md.get("x-modal-token-id"), md.get("x-modal-token-secret")) != \
                (self.server.token_id, self.server.token_secret):
            raise GRPCError(Status.UNAUTHENTICATED, "Invalid token id or secret")
        if sandbox and "v2" in call and md.get("x-modal-auth-token") not in \
                self.server.auth_tokens:
            raise GRPCError(Status.UNAUTHENTICATED, "Invalid auth token")
        await self.server.fault(call.removesuffix("_v2"), stream)
        return request

    def _box(self, sandbox_id: str) -> ModalBox:
        box = self.server.boxes.get(sandbox_id)
        if box is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return box

    # --- apps, environments, images, tokens -------------------------------------------------

    async def ClientHello(self, stream: Any) -> None:
        await self._request(stream, "hello")
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AppGetOrCreate(self, stream: Any) -> None:
        request = await self._request(stream, "app")
        app_id = self.server.apps.setdefault(request.app_name, modal_id("ap"))
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def EnvironmentGetOrCreate(self, stream: Any) -> None:
        await self._request(stream, "environment")
        settings = api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(
            environment_id=self.server.environment_id,
            metadata=api_pb2.EnvironmentMetadata(name="main", settings=settings)))

    async def ImageGetOrCreate(self, stream: Any) -> None:
        request = await self._request(stream, "image")
        commands = list(request.image.dockerfile_commands)
        base = next((c.split(None, 1)[1] for c in commands if c.startswith("FROM ")), "")
        image_id = self.server.images.setdefault(base, modal_id("im"))
        # Built at once: every image is the test server's one root file system.
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(
            image_id=image_id, result=api_pb2.GenericResult(
                status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)))

    async def ImageFromId(self, stream: Any) -> None:
        request = await self._request(stream, "image")
        if request.image_id not in self.server.images.values():
            raise GRPCError(Status.NOT_FOUND, f"Image {request.image_id} not found")
        await stream.send_message(api_pb2.ImageFromIdResponse(image_id=request.image_id))

    async def AuthTokenGet(self, stream: Any) -> None:
        await self._request(stream, "auth")
        token = jwt("client")
        self.server.auth_tokens.add(token)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=token))

    # --- sandboxes --------------------------------------------------------------------------

    async def _create(self, stream: Any, v2: bool) -> None:
        request = await self._request(stream, "create_v2" if v2 else "create", sandbox=True)
        tags = {t.tag_name: t.tag_value for t in request.tags}
        box = ModalBox(request.app_id, request.definition, tags, self.server.root, v2)
        try:  # the call has no deadline: the sandbox is ready when it returns
            await self.server.blocking(box.start)
        except OSError as exc:
            raise GRPCError(Status.INTERNAL, f"the sandbox did not start: {exc}") from None
        self.server.add(box)
        metadata = api_pb2.SandboxHandleMetadata(app_id=box.app_id)
        if not v2:
            return await stream.send_message(api_pb2.SandboxCreateResponse(
                sandbox_id=box.id, metadata=metadata))
        await stream.send_message(api_pb2.SandboxCreateV2Response(
            sandbox_id=box.id, task_id=box.task_id, metadata=metadata,
            command_router_access=self.server.router_access(box)))

    async def SandboxCreateV2(self, stream: Any) -> None:
        await self._create(stream, v2=True)

    async def SandboxCreate(self, stream: Any) -> None:
        await self._create(stream, v2=False)

    async def _task_id(self, stream: Any, call: str) -> None:
        request = await self._request(stream, call, sandbox=True)
        box = self._box(request.sandbox_id)
        answer = api_pb2.SandboxGetTaskIdResponse(task_result=box.result) if box.result \
            else api_pb2.SandboxGetTaskIdResponse(task_id=box.task_id)
        await stream.send_message(answer)

    async def SandboxGetTaskIdV2(self, stream: Any) -> None:
        await self._task_id(stream, "task_v2")

    async def SandboxGetTaskId(self, stream: Any) -> None:
        await self._task_id(stream, "task")

    async def SandboxGetCommandRouterAccess(self, stream: Any) -> None:
        request = await self._request(stream, "access_v2", sandbox=True)
        box = self._box(request.sandbox_id or "") if request.sandbox_id else \
            self.server.by_task.get(request.task_id)
        if box is None or box.result is not None:
            raise GRPCError(Status.FAILED_PRECONDITION, "Sandbox has already finished")
        access = self.server.router_access(box)
        await stream.send_message(api_pb2.SandboxGetCommandRouterAccessResponse(
            url=access.url, jwt=access.jwt))

    async def TaskGetCommandRouterAccess(self, stream: Any) -> None:
        request = await self._request(stream, "access")
        box = self.server.by_task.get(request.task_id)
        if box is None or box.result is not None:
            raise GRPCError(Status.FAILED_PRECONDITION, "Task has already finished")
        access = self.server.router_access(box)
        await stream.send_message(api_pb2.TaskGetCommandRouterAccessResponse(
            url=access.url, jwt=access.jwt))

    async def _wait(self, stream: Any, call: str) -> None:
        request = await self._request(stream, call, sandbox=True)
        box = self._box(request.sandbox_id)
        if box.result is None and request.timeout > 0:
            try:
                await asyncio.wait_for(box.ended.wait(), min(request.timeout, LONG_POLL_MAX))
            except asyncio.TimeoutError:
                pass
        await stream.send_message(api_pb2.SandboxWaitResponse(
            result=box.result, metadata=api_pb2.SandboxHandleMetadata(app_id=box.app_id)))

    async def SandboxWaitV2(self, stream: Any) -> None:
        await self._wait(stream, "wait_v2")

    async def SandboxWait(self, stream: Any) -> None:
        await self._wait(stream, "wait")

    async def _terminate(self, stream: Any, call: str) -> None:
        request = await self._request(stream, call, sandbox=True)
        box = self._box(request.sandbox_id)
        existing = box.result
        await self.server.end(box, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
        await stream.send_message(api_pb2.SandboxTerminateResponse(existing_result=existing))

    async def SandboxTerminateV2(self, stream: Any) -> None:
        await self._terminate(stream, "terminate_v2")

    async def SandboxTerminate(self, stream: Any) -> None:
        await self._terminate(stream, "terminate")

    async def _list(self, stream: Any, call: str) -> None:
        request = await self._request(stream, call, sandbox=True)
        wanted = {t.tag_name: t.tag_value for t in request.tags}
        found = sorted((box for box in list(self.server.boxes.values())
                        if (not request.app_id or box.app_id == request.app_id)
                        and (request.include_finished or box.result is None)
                        and all(box.tags.get(k) == v for k, v in wanted.items())
                        and (not request.before_timestamp
                             or box.created < request.before_timestamp)),
                       key=lambda box: -box.created)
        await stream.send_message(api_pb2.SandboxListResponse(
            sandboxes=[box.info() for box in found[:100]]))

    async def SandboxListV2(self, stream: Any) -> None:
        await self._list(stream, "list_v2")

    async def SandboxList(self, stream: Any) -> None:
        await self._list(stream, "list")
