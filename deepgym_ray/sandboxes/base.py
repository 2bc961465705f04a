"""The sandbox provider protocol: make a sandbox, put files in it, run a command, tear it down.

Providers only move files and run commands; they know nothing of verifiers or scores. A provider
reports its own failures as :class:`~deepgym_ray.exceptions.SandboxError` subclasses (a provider
HTTP error, a connection error, a dead sandbox) so the judge can tell them from the answer's.

Example:
    from deepgym_ray.sandboxes import make_provider
    provider = make_provider("local")
    sandbox = provider.create(env)
    provider.put_files(sandbox, {"hello.py": b"print(1)"})
    provider.run(sandbox, ["python3", "hello.py"], timeout=5).stdout
    # b'1\\n'
    provider.destroy(sandbox)
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.cancel import CancelSignal


def sandbox_path(name: str) -> PurePosixPath:
    """``name`` as a path relative to a sandbox's work directory; SandboxError for a path that
    would leave it (absolute, ``..``, empty). Every provider's ``put_files`` checks with it."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise SandboxError(f"cannot put {name!r}: not a relative path inside the sandbox")
    return rel


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

    Four methods make a provider; the attributes and hooks below have defaults that suit a
    sandbox that is itself the isolation (a container, a remote machine).
    """

    #: Short name used in logs and configuration (``local``, ``docker``, ``daytona``, ...).
    name: str = "provider"
    #: The interpreter command the judge's runner is started with, inside the sandbox.
    python: str = "python3"
    #: True when runs mostly wait on the network (a remote provider): the pool then gives the
    #: provider many light actors, each with many runs in flight.
    io_bound: bool = False
    #: True when ``run`` takes ``cancel=``, a :class:`CancelSignal` that another thread sets
    #: when the run's caller gives up on it; ``run`` then kills the run's processes as it does
    #: at the deadline and returns at once (what it returns is discarded). The judge passes
    #: ``cancel`` only to such providers, so one written without it keeps working: its runs
    #: go on to their end.
    cancellable: bool = False
    #: True when what a run leaves in its sandbox's solution directory is there for the next
    #: run in the same sandbox: an agent's episode (``sessions``) needs it.
    keeps_work: bool = False

    def solution_launch(self, sandbox: Sandbox) -> dict[str, Any]:
        """How the runner starts solution processes in ``sandbox``: settings merged into the
        runner's config (a confinement prefix, a uid, resource limits; see ``LocalProvider``).
        The default, ``{}``, starts them as plain child processes of the runner."""
        return {}

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
        """Run ``command`` in the sandbox's work directory, killing everything at ``timeout``.

        A provider with ``cancellable = True`` also takes ``cancel: CancelSignal | None`` and
        kills everything the moment it is set, the same way."""

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

    def warm(self) -> None:  # noqa: B027 - optional hook, most providers keep nothing warm
        """Start, ahead of the first run, what this provider keeps warm (helper processes, a
        connection), without waiting for it to be ready. A command about to score many runs
        on this machine calls it once, in the background; the default does nothing."""

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release clients and warm sandboxes. The provider is not used afterwards."""


class ForwardingProvider(SandboxProvider):
    """A provider around another one (``inner``), to record or to inject faults: every method
    and hook goes to ``inner`` unless a subclass overrides it.

    The hooks are forwarded explicitly, never left to the defaults above: a wrapped local
    provider whose ``solution_launch`` fell back to ``{}`` would run solutions unconfined.
    ``cancellable`` is the inner provider's, unless a subclass overrides ``run``: then it is
    False until the subclass sets it (and takes ``cancel=None`` and passes it on).

    Example:
        class Counting(ForwardingProvider):
            def create(self, env):
                self.made += 1
                return self.inner.create(env)
    """

    def __init__(self, inner: SandboxProvider) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def python(self) -> str:  # type: ignore[override]
        return self.inner.python

    @property
    def io_bound(self) -> bool:  # type: ignore[override]
        return self.inner.io_bound

    @property
    def keeps_work(self) -> bool:  # type: ignore[override]
        return self.inner.keeps_work

    @property
    def cancellable(self) -> bool:  # type: ignore[override]
        # A subclass that overrides ``run`` gets ``cancel`` only when it says it takes it (by
        # setting ``cancellable`` itself): an override written without it keeps working.
        return self.inner.cancellable and type(self).run is ForwardingProvider.run

    def solution_launch(self, sandbox: Sandbox) -> dict[str, Any]:
        return self.inner.solution_launch(sandbox)

    def create(self, env: Environment) -> Sandbox:
        return self.inner.create(env)

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        self.inner.put_files(sandbox, files)

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None,
            cancel: CancelSignal | None = None) -> CommandResult:
        if cancel is None:  # an inner provider that is not cancellable never gets it
            return self.inner.run(sandbox, command, timeout=timeout, stdin=stdin, env=env)
        return self.inner.run(sandbox, command, timeout=timeout, stdin=stdin, env=env,
                              cancel=cancel)

    def destroy(self, sandbox: Sandbox) -> None:
        self.inner.destroy(sandbox)

    def warm(self) -> None:
        self.inner.warm()

    def close(self) -> None:
        self.inner.close()
