"""The E2B provider: judge runs in E2B sandboxes through the ``e2b`` SDK.

Configured by explicit options or ``E2B_API_KEY`` and ``E2B_DOMAIN`` (or ``E2B_API_URL`` and
``E2B_SANDBOX_URL`` for a self-hosted E2B; see ``options``). Each environment gets sandboxes
from its own template (``Environment.image``, else the provider's ``template``, else E2B's
default), internet access off, and a lifetime (``lifetime`` seconds): E2B kills a sandbox at
the end of it, so a crashed actor never leaks a paid sandbox for longer; a run that would
outlive it extends it first (one call), and an idle sandbox past half of it is extended
before it is reused. Everything else is what every remote provider does (see
``sandboxes.remote``): sandboxes reused once a run's processes are proven gone, a run as
one command (the in-sandbox program, which confines it), every call bounded
by our own deadline and every failure typed (see ``calls``), throttled creates that wait.

E2B runs a command as ``root`` on request (its template's user, ``user``, has passwordless
sudo too), so the in-sandbox program runs as root directly. A run is one call: its spec
travels in the command's environment (which only root can read in /proc, and which E2B's
daemon neither logs nor shows to anyone but our own client), written root-only by the shell
that then runs the program; a spec too large for one environment string is uploaded first.

Example:
    provider = E2BProvider(lifetime=600)
    DeepGym(provider=provider).run(env, answer).score
    # 1.0
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from deepgym_ray.exceptions import SandboxError, SandboxEvictedError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.e2b.calls import translate
from deepgym_ray.sandboxes.e2b.options import E2BOptions, check_access, load_sdk
from deepgym_ray.sandboxes.remote import Remote, RemoteProvider, privilege

__all__ = ["E2BOptions", "E2BProvider"]

logger = logging.getLogger(__name__)
HOME = "/root"  # runs' directories: root's (the in-sandbox program runs as root)


class E2BProvider(RemoteProvider):
    """Judge runs in E2B sandboxes (see the module docstring); options: E2BOptions."""

    name = "e2b"
    service = "E2B"

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = E2BOptions(**options).resolved()

    @classmethod
    def preflight(cls, **options: Any) -> None:
        """Raise SandboxError with one clear line when the SDK is missing, no key is set, or
        the service refuses the key; return quietly when E2B answers."""
        check_access(E2BOptions(**options).resolved())

    def translate(self, exc: BaseException, what: str, sandbox_id: str | None = None
                  ) -> SandboxError:
        ends_at, now = self.lifetime_left(sandbox_id)
        return translate(exc, what, sandbox_id, ends_at=ends_at, now=now)

    # --- sandboxes -------------------------------------------------------------------------

    def _spec(self, env: Environment) -> tuple:
        return (env.image or self.options.template,)

    def _open(self, key: tuple) -> Remote:
        sdk, o = load_sdk(), self.options
        (template,) = key
        if not o.api_key:
            raise SandboxError("E2B needs an API key: set E2B_API_KEY or pass api_key")
        started = time.monotonic()
        box = self.bounded(sdk.Sandbox.create, template=template, timeout=o.lifetime,
                           metadata={"deepgym": "judge", "deepgym.instance": self.instance},
                           allow_internet_access=False, request_timeout=o.create_timeout,
                           **o.connection(), deadline=o.create_timeout + 5,
                           what="create a sandbox")
        remote = Remote(sdk=box, key=key, home=HOME, root=privilege.RootAccess(),
                        ends_at=started + o.lifetime)
        try:
            info = self.bounded(box.get_info, request_timeout=o.call_timeout,
                                deadline=o.call_timeout + 5, what="look at the sandbox",
                                sandbox_id=box.sandbox_id)
        except SandboxError:  # not ready: deleted in the background (close waits, retries)
            self._teardown.spawn(remote.id, self._delete, remote)
            raise
        memory = getattr(info, "memory_mb", None)
        if isinstance(memory, int) and memory > 0:
            remote.memory_mb = memory
        return remote

    def _still_running(self, remote: Remote) -> bool:
        """An idle sandbox past half its lifetime is extended (which fails if it is gone);
        one idle for ``state_check_after`` seconds is looked at (one call)."""
        o, now = self.options, time.monotonic()
        try:
            if remote.ends_at is not None and remote.ends_at - now < o.lifetime / 2:
                self._extend(remote, o.lifetime)
            elif now - remote.last_used >= o.state_check_after:
                info = self.bounded(remote.sdk.get_info, request_timeout=o.call_timeout,
                                    deadline=o.call_timeout + 5, what="look at the sandbox",
                                    sandbox_id=remote.id)
                return str(getattr(info.state, "value", info.state)).lower() == "running"
        except SandboxError:
            return False
        return True

    def _extend(self, remote: Remote, seconds: float) -> None:
        """Make ``remote`` live ``seconds`` from now (E2B's ``set_timeout``)."""
        o, asked = self.options, time.monotonic()
        self.bounded(remote.sdk.set_timeout, int(seconds), request_timeout=o.call_timeout,
                     deadline=o.call_timeout + 5, what="extend the sandbox's lifetime",
                     sandbox_id=remote.id)
        remote.ends_at = asked + int(seconds)

    def _delete(self, remote: Remote) -> str | None:
        """Kill a sandbox: None once it is gone (or was already), else why not (logged;
        ``close`` tries once more, and its lifetime ends it in the end)."""
        o = self.options
        try:
            self.bounded(remote.sdk.kill, request_timeout=o.call_timeout,
                         deadline=o.call_timeout + 5, what="kill a sandbox",
                         sandbox_id=remote.id)
        except SandboxEvictedError:  # gone already
            return None
        except SandboxError as exc:
            logger.warning("could not kill E2B sandbox %s: %s", remote.id, exc)
            return f"{type(exc).__name__}: {exc}"
        return None

    # --- a run's call ---------------------------------------------------------------------

    def _upload(self, remote: Remote, files: list[tuple[str, bytes]]) -> None:
        files = self._hold_spec(remote, files)  # a spec one variable holds rides on the command
        if files:
            remote.sdk.files.write_files([{"path": path, "data": data} for path, data in files],
                                         user="root", request_timeout=self.options.call_timeout)

    def _execute(self, remote: Remote, command: str, timeout: float,
                 complete: Callable[[str, str], bool]) -> tuple[str, str, Any]:
        # E2B's daemon streams the command's output and ends the stream at its end: complete.
        o = self.options
        # The command's stream may last the run's time and a margin; the sandbox must too.
        needed = timeout + 2 * o.call_timeout
        if remote.ends_at is not None and remote.ends_at - time.monotonic() < needed:
            self._extend(remote, max(o.lifetime, needed))
        command, envs = self._with_spec(remote, command)
        sdk = load_sdk()
        try:
            done = remote.sdk.commands.run(command, envs=envs, user="root", timeout=needed,
                                           request_timeout=o.call_timeout)
        except sdk.CommandExitException as exc:  # a nonzero exit: the program's report says
            return exc.stdout or "", exc.stderr or "", exc.exit_code
        return done.stdout or "", done.stderr or "", done.exit_code
