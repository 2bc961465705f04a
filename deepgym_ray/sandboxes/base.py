"""The sandbox provider protocol: make a sandbox, put files in it, run a command, tear it down.

Providers only move files and run commands; they know nothing of verifiers or scores. A provider
reports its own failures as :class:`~deepgym_ray.exceptions.SandboxError` subclasses (a provider
HTTP error, a connection error, a dead sandbox) so the judge can tell them from the answer's.

Example:
    >>> from deepgym_ray.sandboxes import make_provider        # doctest: +SKIP
    >>> provider = make_provider("local")                       # doctest: +SKIP
    >>> sandbox = provider.create(env)                          # doctest: +SKIP
    >>> provider.put_files(sandbox, {"hello.py": b"print(1)"})  # doctest: +SKIP
    >>> provider.run(sandbox, ["python3", "hello.py"], timeout=5).stdout  # doctest: +SKIP
    b'1\\n'
    >>> provider.destroy(sandbox)                               # doctest: +SKIP
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepgym_ray.models import Environment


@dataclass
class Sandbox:
    """A provider's handle on one sandbox. ``handle`` is whatever the provider needs."""

    id: str
    provider: str
    handle: Any = field(default=None, repr=False)


@dataclass
class CommandResult:
    """What one command did. ``exit_code`` is None when it was killed at the deadline."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    duration: float = 0.0


class SandboxProvider(abc.ABC):
    """A place to run untrusted code. Implementations must be safe to call from many threads.

    Two optional hooks let the judge do more with a provider, found by ``getattr``:

    - ``python``: the interpreter command the runner is started with (default ``python3``);
    - ``solution_launch(sandbox) -> dict``: how the runner should start solution processes in
      that sandbox (confinement prefix, uid, resource limits; see ``LocalProvider``). Without
      it the runner starts them as plain child processes, and the sandbox itself is the
      isolation (a container or a remote machine).
    """

    #: Short name used in logs and configuration (``local``, ``docker``, ``daytona``, ...).
    name: str = "provider"

    @abc.abstractmethod
    def create(self, env: Environment) -> Sandbox:
        """Make a fresh sandbox for one run of ``env``."""

    @abc.abstractmethod
    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        """Write ``files`` (relative path -> content) into the sandbox's work directory."""

    @abc.abstractmethod
    def run(
        self,
        sandbox: Sandbox,
        command: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run ``command`` in the sandbox's work directory, killing everything at ``timeout``."""

    @abc.abstractmethod
    def destroy(self, sandbox: Sandbox) -> None:
        """Tear the sandbox down; nothing it started may outlive this call."""

    @classmethod
    def preflight(cls, **options: Any) -> None:  # noqa: B027 - optional hook, no-op default
        """Check, cheaply and before any work, that this provider can run here with
        ``options`` (an engine reachable, credentials present, an SDK installed). Raise a
        :class:`~deepgym_ray.exceptions.DeepGymError` whose message is one line saying what
        is missing. Called once when a client is made (``DeepGym(mode=...)``), never per run.
        The default checks nothing."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release clients and warm sandboxes. The provider is not used afterwards."""
