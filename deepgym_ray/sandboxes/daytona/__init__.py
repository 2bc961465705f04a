"""The Daytona provider: judge runs in managed cloud sandboxes through the ``daytona`` SDK.

Configured by explicit options or ``DAYTONA_API_KEY``, ``DAYTONA_API_URL`` and
``DAYTONA_TARGET`` (see ``options``). Each environment gets sandboxes from its own snapshot or
image (``Environment.image``, else the provider's ``image`` or ``snapshot``) with the
provider's resources, all network blocked, and auto-stop and auto-delete set, so a crashed
actor never leaks a paid sandbox for long. A provider keeps the sandboxes it made and hands
each run one that no other run is using: a fresh work directory per run, the solution under a
fresh uid, and the run's processes proven gone before the sandbox is used again (a sandbox
whose cleanup is not proven, whose runs cannot be root, or that failed is deleted instead).
Sandboxes are recreated when they die, expire or are evicted. One thrown away during a batch
is deleted on a thread of its own; ``close`` deletes the rest and returns only once every
sandbox the provider made is deleted, those threads' too (or raises naming what is left).
A create that Daytona throttles (its rate limit, the organization's quota) waits and tries
again, up to ``throttle_wait`` seconds (see ``sandboxes.throttle``).

How a run is confined inside a sandbox (as root, or through its user's sudo; what happens
without either) and how its secrets travel: docs/internals.md, "The Daytona, E2B and Modal
sandboxes".

A run is one call (see ``sandboxes.remote``, which this provider shares with E2B's and
Modal's): ``process.exec``, whose daemon pipes the command to the sandbox's shell with the
call's variables as the process's environment, carries the run's spec in one of them (written
root-only by the shell that then runs the program; the judge's files, once per sandbox, and a
spec too large for one variable go by a bulk upload first). The daemon mixes a command's
stdout and stderr in one answer, so the program writes everything on one stream, its report
after its secret end mark (``remote.one_stream``). Every call is bounded by our own deadline,
and every failure is a typed :class:`~deepgym_ray.exceptions.SandboxError` (see ``calls``):
no verdict, retried elsewhere by the pool.

Example:
    provider = DaytonaProvider(api_url="http://127.0.0.1:3000/api")
    DeepGym(provider=provider).run(env, answer).score
    # 1.0
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from deepgym_ray.exceptions import SandboxError, SandboxEvictedError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.daytona.calls import translate
from deepgym_ray.sandboxes.daytona.clients import SdkClients
from deepgym_ray.sandboxes.daytona.options import DaytonaOptions, check_access, load_sdk
from deepgym_ray.sandboxes.remote import Remote, RemoteProvider, privilege, warn_once

logger = logging.getLogger(__name__)

__all__ = ["DaytonaOptions", "DaytonaProvider"]

class DaytonaProvider(RemoteProvider):
    """Judge runs in Daytona sandboxes (see the module docstring); options: DaytonaOptions."""

    name = "daytona"
    service = "Daytona"
    one_stream = True  # process.exec answers one mixed output

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = DaytonaOptions(**options).resolved()
        self._sdk_clients = SdkClients(self.options)  # a few sandboxes per SDK client

    @classmethod
    def preflight(cls, **options: Any) -> None:
        """Raise SandboxError with one clear line when the SDK is missing, no key is set, or
        the server refuses the key; return quietly when Daytona answers."""
        check_access(DaytonaOptions(**options).resolved())

    def client(self) -> Any:
        """The SDK client, made on first use."""
        return self._sdk_clients.first()

    def translate(self, exc: BaseException, what: str, sandbox_id: str | None = None
                  ) -> SandboxError:
        return translate(exc, what, sandbox_id)

    # --- sandboxes -------------------------------------------------------------------------

    def _spec(self, env: Environment) -> tuple:
        o = self.options
        image = env.image or o.image
        return (image, None if image else o.snapshot, o.cpu, o.memory, o.disk)

    def _fresh_for(self) -> float:
        # Reuse only well inside the auto-stop interval: a stopped sandbox would fail the run.
        return self.options.auto_stop_minutes * 60 * 0.8

    def _still_running(self, remote: Remote) -> bool:
        """Whether a sandbox idle for ``state_check_after`` seconds or more is still running
        (something other than its auto-stop may have stopped it: one API call to know)."""
        if time.monotonic() - remote.last_used < self.options.state_check_after:
            return True
        try:
            self.bounded(remote.sdk.refresh_data, deadline=self.options.call_timeout,
                         what="look at the sandbox", sandbox_id=remote.id)
        except SandboxError:
            return False
        return str(getattr(remote.sdk.state, "value", remote.sdk.state)).lower() == "started"

    def _open(self, key: tuple) -> Remote:
        sdk, o = load_sdk(), self.options
        image, snapshot, cpu, memory, disk = key
        common = dict(language="python", network_block_all=True,
                      labels={"deepgym": "judge", "deepgym.instance": self.instance},
                      auto_stop_interval=o.auto_stop_minutes,
                      auto_delete_interval=o.auto_delete_minutes)
        if image:
            resources = sdk.Resources(cpu=cpu, memory=memory, disk=disk)
            params = sdk.CreateSandboxFromImageParams(image=image, resources=resources, **common)
        else:
            params = sdk.CreateSandboxFromSnapshotParams(snapshot=snapshot, **common)
        index = self._sdk_clients.take()
        try:
            box = self.bounded(self._sdk_clients.get(index).create, params,
                               timeout=o.create_timeout, deadline=o.create_timeout + 5,
                               what="create a sandbox")
        except SandboxError:
            self._sdk_clients.release(index)
            raise
        remote = Remote(sdk=box, key=key, home="", client_index=index,
                        root=privilege.RootAccess())
        try:
            home = self.bounded(box.get_user_home_dir, deadline=o.call_timeout,
                                what="find the sandbox's home", sandbox_id=box.id)
            user = getattr(box, "user", None)
            root = privilege.RootAccess() if user == "root" else self._probe(box)
        except SandboxError:  # not ready: deleted in the background (close waits, retries)
            self._teardown.spawn(remote.id, self._delete, remote)
            raise
        memory = getattr(box, "memory", None)
        remote.home, remote.root = str(home).rstrip("/"), root
        if isinstance(memory, (int, float)) and memory > 0:
            remote.memory_mb = int(memory * 1024)
        if not remote.as_root:
            warn_once(privilege.weaker_warning(self.service, user, root.why_not))
        return remote

    def _probe(self, box: Any) -> privilege.RootAccess:
        """How runs in ``box`` (whose user is not root) become root, if at all."""
        what = "find whether the sandbox's user can become root"
        # A command (python3 and sudo starting in a sandbox just made), not an API call: part
        # of readying the sandbox, so bounded as its creation is (under load it took over 6 s).
        timeout = self.options.create_timeout
        response = self.bounded(box.process.exec, privilege.probe_command(),
                                timeout=int(timeout), deadline=timeout + 5, what=what,
                                sandbox_id=box.id)
        try:
            return privilege.read_probe(str(getattr(response, "result", "") or ""))
        except ValueError as exc:
            raise SandboxError(f"{what}: {exc}", sandbox_id=box.id) from None

    def _delete(self, remote: Remote) -> str | None:
        """Delete a sandbox: None once it is gone (or was already), else why not (logged;
        ``close`` tries once more, and auto-delete removes it in the end)."""
        o = self.options
        index, remote.client_index = remote.client_index, None
        if index is not None:  # its client's place is free once we stop using it
            self._sdk_clients.release(index)
        try:
            self.bounded(remote.sdk.delete, timeout=o.call_timeout,
                         deadline=o.call_timeout + 5, what="delete a sandbox",
                         sandbox_id=remote.id)
        except SandboxEvictedError:  # 404/410: gone already
            return None
        except SandboxError as exc:
            logger.warning("could not delete Daytona sandbox %s: %s", remote.id, exc)
            return f"{type(exc).__name__}: {exc}"
        return None

    # --- a run's call ----------------------------------------------------------------------

    def _upload(self, remote: Remote, files: list[tuple[str, bytes]]) -> None:
        files = self._hold_spec(remote, files)  # a spec one variable holds rides on the command
        if files:
            sdk = load_sdk()
            remote.sdk.fs.upload_files([sdk.FileUpload(source=data, destination=path)
                                        for path, data in files],
                                       timeout=int(self.options.call_timeout))

    def _execute(self, remote: Remote, command: str, timeout: float,
                 complete: Callable[[str, str], bool]) -> tuple[str, str, Any]:
        # The daemon answers once the command has ended and its output is read: complete.
        command, envs = self._with_spec(remote, command)
        response = remote.sdk.process.exec(
            command, env=envs, timeout=math.ceil(timeout + self.options.call_timeout))
        return str(response.result or ""), "", response.exit_code
