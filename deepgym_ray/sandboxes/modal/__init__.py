"""The Modal provider: judge runs in Modal sandboxes through the ``modal`` SDK (1.6.4).

Configured by explicit options or Modal's own configuration (``MODAL_TOKEN_ID`` and
``MODAL_TOKEN_SECRET``, or ``modal token new``; ``MODAL_SERVER_URL``; see ``options``). Each
environment gets sandboxes of its registry image (``Environment.image``, else the provider's
``image``) in one Modal app (``app_name``), with the network blocked, the provider's CPU and
memory, and a lifetime (``lifetime`` seconds, and at least eight times the environment's
timeout): Modal ends a sandbox then, so a crashed actor never leaks one for longer. A
lifetime cannot be extended: a sandbox past half of it is not given another run. Everything
else is what every remote provider does (see ``sandboxes.remote``): sandboxes reused once a
run's processes are proven gone, a run as one command (the in-sandbox program, which
confines it), every call bounded by our own deadline and every failure typed
(see ``calls``), throttled creates that wait.

A Modal sandbox's commands run as root; files go in through a command's stdin or environment
(Modal's file calls need a tool of Modal's own images; this works in any image with
``python3``). A run is one command, whose shell writes the run's spec from its environment
(from its stdin when larger than a secret's value may be) and then runs the program, and
whose output is one stream (``one_stream``: stdout only): two calls, its start and its
output.

Example:
    provider = ModalProvider(lifetime=600)
    DeepGym(provider=provider).run(env, answer).score
    # 1.0
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from deepgym_ray.exceptions import ProviderTimeoutError, SandboxError, SandboxEvictedError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.modal.calls import translate
from deepgym_ray.sandboxes.modal.options import ModalOptions, check_access, load_sdk, make_client
from deepgym_ray.sandboxes.remote import Remote, RemoteProvider, privilege
from deepgym_ray.sandboxes.remote import command as cmd
from deepgym_ray.sandboxes.remote.calls import wait

__all__ = ["ModalOptions", "ModalProvider"]

logger = logging.getLogger(__name__)
HOME = "/root"
STDIN_CHUNK = 8 << 20  # the client sends what one drain has as one message, up to 16 MiB
# An exec's variables go as a secret source, whose values Modal bounds (its secrets guide:
# 32,768 characters): a larger spec goes on the command's stdin.
SPEC_IN_SECRET_MAX = 32_768
# Reads files from stdin: per file a JSON line [path, size], then its bytes; root-only.
_WRITE_FILES = r"""
import json, os, sys
os.umask(0o077)
data = sys.stdin.buffer
while True:
    head = data.readline()
    if not head:
        break
    path, size = json.loads(head)
    body = data.read(size)
    if len(body) != size:
        sys.exit("the input ended inside " + path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(body)
"""


@functools.cache
def _command() -> Callable[..., tuple[Any, bytes | None]]:
    """``(sandbox, argv, stdin, read, **exec_options) -> (process, its stdout or None)``:
    start ``argv`` in ``sandbox``, give it ``stdin`` (unless None) and then the end of input
    (with the last chunk: one call less), and read its stdout to the end if ``read``, as one
    coroutine on the SDK's event loop. Each call of the SDK's blocking interface is a hop
    from our thread to that loop's thread and back (0.2 to 0.4 ms of an actor's CPU per run,
    measured); this is one hop per command. Called with ``_future=True`` (the synchronizer's
    own switch), it returns the call's future, which a run waits on (``calls.wait``). The
    SDK's synchronizer is not public API: the SDK is pinned, and its test server runs every
    path of this."""
    from modal._utils.async_utils import synchronizer

    async def command(sandbox: Any, argv: list[str], stdin: bytes | None, read: bool,
                      **options: Any) -> tuple[Any, bytes | None]:
        proc = await sandbox.exec(*argv, **options)
        chunks = [] if stdin is None else \
            [stdin[at:at + STDIN_CHUNK] for at in range(0, max(len(stdin), 1), STDIN_CHUNK)]
        for n, chunk in enumerate(chunks, 1):
            proc.stdin.write(chunk)
            if n == len(chunks):
                proc.stdin.write_eof()
            await proc.stdin.drain()
        return proc, (await proc.stdout.read() if read else None)

    return synchronizer.create_blocking(command)


class ModalProvider(RemoteProvider):
    """Judge runs in Modal sandboxes (see the module docstring); options: ModalOptions."""

    name = "modal"
    service = "Modal"
    one_stream = True
    calls_are_futures = True  # a run's calls wait through calls.wait, on the run's thread

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = ModalOptions(**options).resolved()
        self._connect_lock = threading.Lock()
        self._client: Any = None
        self._app: Any = None
        self._images: dict[str, Any] = {}

    @classmethod
    def preflight(cls, **options: Any) -> None:
        """Raise SandboxError with one clear line when the SDK is missing, no token is set,
        or Modal refuses it; return quietly when Modal answers."""
        check_access(ModalOptions(**options).resolved())

    def translate(self, exc: BaseException, what: str, sandbox_id: str | None = None
                  ) -> SandboxError:
        ends_at, now = self.lifetime_left(sandbox_id)
        return translate(exc, what, sandbox_id, ends_at=ends_at, now=now)

    # --- sandboxes -------------------------------------------------------------------------

    def _spec(self, env: Environment) -> tuple:
        o = self.options
        # A run may take three times its timeout and its calls' margins: a sandbox reused
        # until half its lifetime has that left.
        lifetime = max(o.lifetime, math.ceil(8 * env.timeout + 4 * o.call_timeout + 60))
        return (env.image or o.image, lifetime)

    def _connection(self, image: str) -> tuple[Any, Any, Any]:
        """The client, the app and ``image`` (each made once per provider)."""
        sdk, o = load_sdk(), self.options
        with self._connect_lock:
            if self._client is None:
                self._client = make_client(o)
            if self._app is None:
                self._app = self.bounded(sdk.App.lookup, o.app_name, create_if_missing=True,
                                         client=self._client, deadline=o.call_timeout,
                                         what="look up the app")
            if image not in self._images:
                self._images[image] = sdk.Image.from_registry(image)
            return self._client, self._app, self._images[image]

    def _open(self, key: tuple) -> Remote:
        sdk, o = load_sdk(), self.options
        image, lifetime = key
        client, app, modal_image = self._connection(image)
        started = time.monotonic()
        box = self.bounded(sdk.Sandbox.create, app=app, image=modal_image, timeout=lifetime,
                           block_network=True, cpu=o.cpu, memory=o.memory_mb,
                           tags={"deepgym": "judge", "deepgym_instance": self.instance},
                           client=client, deadline=o.create_timeout, what="create a sandbox")
        return Remote(sdk=box, key=key, home=HOME, root=privilege.RootAccess(),
                      memory_mb=o.memory_mb, ends_at=started + lifetime)

    def _still_running(self, remote: Remote) -> bool:
        """A sandbox past half its lifetime takes no more runs; one idle for
        ``state_check_after`` seconds is looked at (one call)."""
        o, now = self.options, time.monotonic()
        if remote.ends_at is not None and remote.ends_at - now < remote.key[1] / 2:
            return False
        if now - remote.last_used < o.state_check_after:
            return True
        try:
            return self.bounded(remote.sdk.poll, deadline=o.call_timeout,
                                what="look at the sandbox", sandbox_id=remote.id) is None
        except SandboxError:
            return False

    def _delete(self, remote: Remote) -> str | None:
        """Terminate a sandbox: None once it is gone (or was already), else why not (logged;
        ``close`` tries once more, and its lifetime ends it in the end)."""
        try:
            self.bounded(remote.sdk.terminate, deadline=self.options.call_timeout,
                         what="terminate a sandbox", sandbox_id=remote.id)
        except SandboxEvictedError:  # gone already
            return None
        except SandboxError as exc:
            logger.warning("could not terminate Modal sandbox %s: %s", remote.id, exc)
            return f"{type(exc).__name__}: {exc}"
        return None

    # --- a run's two calls ---------------------------------------------------------------

    def _upload(self, remote: Remote, files: list[tuple[str, bytes]]) -> None:
        if len(files) == 1:  # a run's spec: it goes in with the program's own command
            remote.staged = files
            return
        # the judge's files, once per sandbox
        payload = b"".join(json.dumps([path, len(data)]).encode() + b"\n" + data
                           for path, data in files)
        proc, _ = wait(_command()(remote.sdk, ["python3", "-I", "-S", "-c", _WRITE_FILES],
                                  payload, False, text=False, _future=True,
                                  timeout=math.ceil(self.options.call_timeout)))
        code = wait(proc.wait(_future=True))
        if code == -1:  # the client's deadline for the command passed
            raise ProviderTimeoutError(f"writing the run's files: no end within "
                                       f"{self.options.call_timeout:.0f}s", sandbox_id=remote.id)
        if code != 0:
            said = wait(proc.stderr.read(_future=True)).decode("utf-8", "replace")
            said = said.strip().splitlines()
            raise SandboxError(f"writing the run's files failed (exit code {code}): "
                               + (said[-1] if said else "nothing said"), sandbox_id=remote.id)

    def _execute(self, remote: Remote, command: str, timeout: float,
                 complete: Callable[[str, str], bool]) -> tuple[str, str, Any]:
        # The spec in the command's environment (Modal sends it with the start, as a secret)
        # and one output stream (``one_stream``): stderr is not sent, the exit status not
        # asked for when the output is complete (the report has it). The output ends at the
        # command's end (Modal's router keeps all of it). The command's own bound lies beyond
        # ours (the run's deadline), which is the one that fires.
        limit = math.ceil(timeout + 3 * self.options.call_timeout)
        devnull = load_sdk().stream_type.StreamType.DEVNULL
        argv, env, stdin = ["bash", "-c", command], None, None
        staged, remote.staged = remote.staged, []
        if staged:  # the spec first, written by the shell that then runs the program
            ((path, spec),) = staged
            env = cmd.spec_variable(spec, limit=SPEC_IN_SECRET_MAX)
            if env is not None:
                argv = cmd.spec_then_run(path, command, "environment")
            else:  # more than one secret value holds: on its stdin (a call more)
                argv, stdin = cmd.spec_then_run(path, command, "stdin"), spec
        proc, out = wait(_command()(remote.sdk, argv, stdin, True, text=False, timeout=limit,
                                    stderr=devnull, env=env, _future=True))
        stdout = out.decode("utf-8", "surrogateescape")
        if complete(stdout, ""):
            return stdout, "", None
        code = wait(proc.wait(_future=True))
        if code == -1:  # the client's deadline for the command passed (ours comes first)
            raise ProviderTimeoutError(f"the run's program: no end within {limit}s",
                                       sandbox_id=remote.id)
        return stdout, "", code

    def close(self) -> None:
        try:
            super().close()
        finally:
            with self._connect_lock:
                client, self._client, self._app = self._client, None, None
            if client is not None:
                try:
                    client.close()
                except Exception as exc:  # noqa: BLE001 - its sandboxes are gone already
                    logger.debug("closing the Modal client: %s", exc)
