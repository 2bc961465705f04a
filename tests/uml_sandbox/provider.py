"""A remote provider whose sandboxes are User-Mode Linux machines with cgroup v2 only.

Everything of a remote run is the production code (``RemoteProvider``: the spec in the
command's environment, the judge's files once per sandbox, reuse once a run's processes are
proven gone; in the machine, the in-sandbox program, the runner, the verifier and the
solution), run in a real kernel whose cgroups are v2 only; only the cloud's calls are this
module's: a machine's console instead of an HTTP API.

Example:
    provider = UmlProvider(solution_memory_mb=256)
    DeepGym(mode="local", backend="threads", provider=lambda: provider).run(env, answer)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.remote import Remote, RemoteProvider, privilege
from deepgym_ray.sandboxes.remote.options import RemoteOptions

from .machine import UmlMachine


class UmlProvider(RemoteProvider):
    """Judge runs in User-Mode Linux machines (see the module docstring)."""

    name = "uml"
    service = "UML"

    def __init__(self, machine_memory_mb: int = 768,
                 controllers: tuple[str, ...] = ("memory", "pids"), layout: str = "container",
                 **options: Any) -> None:
        super().__init__()
        self.options = RemoteOptions(**options)
        self.machine_memory_mb, self.controllers = machine_memory_mb, controllers
        self.layout = layout
        self.machines: list[UmlMachine] = []  # every machine it booted, for the tests to see

    def translate(self, exc: BaseException, what: str, sandbox_id: str | None = None
                  ) -> SandboxError:
        return SandboxError(f"{what}: {type(exc).__name__}: {exc}", sandbox_id=sandbox_id)

    def _spec(self, env: Environment) -> tuple:
        return ("uml",)

    def _open(self, key: tuple) -> Remote:
        try:
            machine = UmlMachine(self.machine_memory_mb, self.controllers, self.layout).start()
        except (OSError, RuntimeError) as exc:
            raise SandboxError(f"cannot boot a machine: {exc}") from exc
        self.machines.append(machine)
        return Remote(sdk=machine, key=key, home="/root", root=privilege.RootAccess(),
                      memory_mb=self.machine_memory_mb)

    def _still_running(self, remote: Remote) -> bool:
        return remote.sdk.alive()

    def _upload(self, remote: Remote, files: list[tuple[str, bytes]]) -> None:
        files = self._hold_spec(remote, files)
        if files:
            remote.sdk.write(files)

    def _execute(self, remote: Remote, command: str, timeout: float,
                 complete: Callable[[str, str], bool]) -> tuple[str, str, Any]:
        command, envs = self._with_spec(remote, command)
        done = remote.sdk.exec(command, env=envs, timeout=timeout + 30)
        if done.get("timed_out"):
            raise TimeoutError(f"the command outlived {timeout + 30:.0f} s")
        return done["stdout"], done["stderr"], done["code"]

    def _delete(self, remote: Remote) -> str | None:
        remote.sdk.stop()
        return None
