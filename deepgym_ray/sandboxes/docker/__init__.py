"""The Docker sandbox provider: warm containers on a Docker engine, reused across runs.

Each provider (one per verifier actor) keeps up to ``warm_containers`` idle containers per
image. A run takes one (or starts one), sends the verifier, the solution and the runner's config
to the agent inside it in one message (no ``docker exec``: the agent forks a runner from
preloaded judge modules, like the local fork server), and gets the runner's output back, with
the agent's proof that nothing of the run is left (``clean``). A container that is not clean,
died, or stopped answering is removed and a new one takes its place. ``close`` returns once
every container the provider made is removed (those removed on background threads after a
failure and those still starting too), or raises naming the ones it could not remove; the
containers of a process killed without ``close`` are left to the next provider's sweep of
this host (``container.remove_stale``).

Inside (see ``agent``): no network, memory, pids and CPU limits, a read-only root, tmpfs work
areas, only the capabilities the agent needs, no new privileges; the verifier runs as one random
non-root uid and the solution as another, which cannot enter the verifier's directory or read
the judge's files.

Classification (the reward contract): the engine unreachable, an API error, a container that
could not start, died or vanished (removed by hand, the engine stopped): a ``SandboxError``,
never a verdict (the pool retries it elsewhere). A container killed for memory after the
solution was in play: the runner's in-play report is kept, so the judge records
``policy_sandbox_failure``, a judged 0. A missing image: an error naming the image and
``scripts/build_docker_image.sh``.

Example:
    dg = DeepGym(mode="docker", image="deepgym/python:3-bookworm")
    dg.run(load_environment("coin_change"), answer).score
    # 1.0
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepgym_ray.exceptions import (
    ProviderConnectionError,
    SandboxDiedError,
    SandboxError,
)
from deepgym_ray.judge import RUNNER, STEP, sandbox_judge_files
from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.sandboxes.base import (
    CancelSignal,
    CommandResult,
    Sandbox,
    SandboxProvider,
    sandbox_path,
)
from deepgym_ray.sandboxes.docker import agent
from deepgym_ray.sandboxes.docker.container import (
    INSTANCE_LABEL,
    OWNER_LABEL,
    PATH,
    ContainerGone,
    ContainerSettings,
    WarmContainer,
    remove_labelled,
    remove_quietly,
    remove_stale,
)
from deepgym_ray.sandboxes.docker.engine_errors import engine_error
from deepgym_ray.sandboxes.docker.repository_tasks import RepositoryTasks
from deepgym_ray.sandboxes.docker.task_container import TaskContainers
from deepgym_ray.sandboxes.teardown import Teardown

__all__ = ["DEFAULT_IMAGE", "DockerProvider"]

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "python:3.11-slim"
MB = 1 << 20
# Time the host gives the agent beyond a run's limit to kill, clean up and answer.
REPLY_GRACE = 20.0
_ZYGOTE = "deepgym_zygote.py"


def _judge_files() -> dict[str, bytes]:
    """What every container gets once: the judge's files, the judge's zygote module, and the
    agent's own helpers (imported by name inside the container)."""
    from pathlib import Path

    import deepgym_ray.judge as judge_package

    here = Path(__file__).parent
    files = sandbox_judge_files()
    files[_ZYGOTE] = (Path(judge_package.__file__).parent / _ZYGOTE).read_bytes()
    files["deepgym_agent_cleanup.py"] = (here / "cleanup.py").read_bytes()
    files["deepgym_agent_removal.py"] = (here.parent / "removal.py").read_bytes()
    files["deepgym_agent_zygote.py"] = (here / "zygote.py").read_bytes()
    return files


@dataclass
class _Run:
    container: WarmContainer
    timeout: float
    files: dict[str, bytes] = field(default_factory=dict)
    requests: int = 0  # commands run in this sandbox so far
    session: bool = False  # an agent's session: its work directory lasts to the end


def _remove_then_close(box: WarmContainer) -> str | None:
    """Remove the container, then close the channel (shut down, then closed): a run blocked
    reading it sees it end."""
    why = remove_quietly(box.api, box.id)
    box.close()
    return why


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class DockerProvider(RepositoryTasks, SandboxProvider):
    """Warm containers on a Docker engine (see the module docstring).

    ``image``: the image for environments that name none (any image with ``python3``; default
    ``DEEPGYM_DOCKER_IMAGE`` from the environment, else ``python:3.11-slim``).
    ``memory_mb``, ``pids_limit``, ``cpus``: limits of each container (verifier and solution
    together); ``solution_memory_mb``, ``max_processes``, ``max_file_mb``, ``max_open_files``:
    limits of each solution process. ``read_only``: the container's root file system (set it
    False for an image that must write outside ``/tmp``; then every file the run's uids own is
    swept after each run). ``warm_containers``: idle containers kept per image.
    ``base_url``: the engine (default: ``DOCKER_HOST`` or the local socket).
    """

    name = "docker"
    python = "python3"
    cancellable = True  # the agent kills a given-up run as at its deadline
    keeps_work = True  # the agent keeps a sandbox's solution directory (``keep_solution``)

    def __init__(self, *, image: str | None = None, memory_mb: int = 2048,
                 pids_limit: int = 256, cpus: float = 1.0, solution_memory_mb: int = 1024,
                 max_processes: int = 64, max_file_mb: int = 64, max_open_files: int = 256,
                 verifier_memory_mb: int = 1536, read_only: bool = True, tmpfs_mb: int = 256,
                 max_files: int = 20000, warm_containers: int = 4, base_url: str | None = None,
                 api_timeout: float = 60.0, start_timeout: float = 60.0) -> None:
        self.image = image or os.environ.get("DEEPGYM_DOCKER_IMAGE") or DEFAULT_IMAGE
        #: This provider's label value: ``close`` finds every container it made by it, even
        #: one whose start was cut short before the provider kept a handle on it.
        self.instance = secrets.token_hex(8)
        self.settings = ContainerSettings(memory_mb=memory_mb, pids_limit=pids_limit, cpus=cpus,
                                          read_only=read_only, tmpfs_mb=tmpfs_mb,
                                          tmpfs_files=max_files,
                                          start_timeout=start_timeout,
                                          labels={OWNER_LABEL: _owner(),
                                                  INSTANCE_LABEL: self.instance})
        self.solution_limits = {"as": solution_memory_mb * MB, "nproc": max_processes,
                                "fsize": max_file_mb * MB, "nofile": max_open_files,
                                "core": 0}
        self.verifier_limits = {"as": verifier_memory_mb * MB, "core": 0,
                                "fsize": max_file_mb * 4 * MB}
        self.warm_containers = warm_containers
        self.base_url, self.api_timeout = base_url, api_timeout
        self._api: Any = None
        self._lock = threading.Lock()
        self._idle: dict[str, list[WarmContainer]] = {}
        self._live: set[WarmContainer] = set()
        self._files = _judge_files()
        self._teardown = Teardown()  # removals on background threads, starts in flight
        self._started_any = False  # a container may exist: close lists them by label
        self._closed = False
        self._tasks: TaskContainers | None = None  # see RepositoryTasks
        self._images_found: dict[str, str] = {}  # task images this provider has seen
        #: Builds a task's image on this node (a pool sets it to the node's builder actor).
        self.image_builder: Callable[[ImageRecipe], str] | None = None

    # --- the engine -------------------------------------------------------------------------

    @classmethod
    def preflight(cls, **options: Any) -> None:
        """Raise SandboxError (one line) unless the SDK is installed and the engine answers."""
        try:
            import docker
        except ImportError:
            raise SandboxError("the docker sandbox needs the 'docker' Python package "
                               "(pip install docker)") from None
        url = options.get("base_url") or os.environ.get("DOCKER_HOST") or "the local socket"
        try:
            client = docker.APIClient(base_url=options.get("base_url"), version="auto",
                                      timeout=10) if options.get("base_url") else \
                docker.from_env(timeout=10).api
            client.ping()
        except Exception as exc:  # noqa: BLE001 - every way of not answering means the same
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise SandboxError(f"the Docker engine at {url} is not reachable ({reason}); "
                               "start dockerd (see .ci/run)") from None

    def _client(self) -> Any:
        """The engine's API client, made on first use (and again after it failed)."""
        with self._lock:
            if self._api is not None:
                return self._api
        try:
            import docker

            if self.base_url:
                api = docker.APIClient(base_url=self.base_url, version="auto",
                                       timeout=self.api_timeout)
            else:
                api = docker.from_env(timeout=self.api_timeout).api
        except Exception as exc:  # noqa: BLE001
            raise engine_error(exc) from exc
        with self._lock:
            if self._api is None:
                self._api = api
                threading.Thread(target=remove_stale, args=(api,), daemon=True).start()
            return self._api

    # --- warm containers --------------------------------------------------------------------

    def _take(self, image: str) -> WarmContainer:
        while True:
            with self._lock:
                if self._closed:
                    raise SandboxError("the docker provider is closed")
                idle = self._idle.get(image)
                box = idle.pop() if idle else None
            if box is None:
                break
            if box.idle_and_alive():
                return box
            logger.warning("container %s died while idle (%s); replacing it", box.name,
                           box.diagnose().get("Status", "gone"))
            self._retire(box)
        api = self._client()
        self._started_any = True
        with self._teardown.creating():  # close waits for this start to end
            try:
                box = WarmContainer.start(api, image, self.settings, self._files)
            except ContainerGone as exc:
                raise SandboxError(f"a container of {image!r} did not start its agent: "
                                   f"{exc}") from exc
            except Exception as exc:  # noqa: BLE001 - SDK and transport errors
                raise engine_error(exc, image) from exc
            with self._lock:
                closed = self._closed
                if not closed:
                    self._live.add(box)
            if closed:  # close ran while it started: it is this thread's to remove
                box.remove()
                raise SandboxError("the docker provider was closed while a container started")
        return box

    def _give_back(self, box: WarmContainer) -> None:
        with self._lock:
            idle = self._idle.setdefault(box.image, [])
            if box.healthy and not self._closed and len(idle) < self.warm_containers:
                idle.append(box)
                return
        self._retire(box)

    def _retire(self, box: WarmContainer) -> None:
        # Removed on a thread of its own (the run need not wait for the engine), which
        # close() waits for.
        with self._lock:
            self._live.discard(box)
        box.close()
        self._teardown.spawn(box.name, remove_quietly, box.api, box.id)

    # --- the provider protocol --------------------------------------------------------------

    def create(self, env: Environment) -> Sandbox:
        box = self._take(env.image or self.image)
        return Sandbox(id=f"{box.name}/{box.runs + 1}", provider=self.name,
                       handle=_Run(box, env.timeout))

    def put_files(self, sandbox: Sandbox, files: Mapping[str, bytes]) -> None:
        run: _Run = sandbox.handle
        for name, content in files.items():
            rel = sandbox_path(name)
            if self._files.get(name) == content:
                continue  # the judge's own files are in the container already
            run.files[str(rel)] = bytes(content)

    def solution_launch(self, sandbox: Sandbox) -> dict:
        """Solution processes come from the container's zygote as the solution uid. The
        interpreter named here does not exist: if the zygote could not serve, the runner
        fails to start the process instead of running it as the verifier's uid."""
        run: _Run = sandbox.handle
        limits = dict(self.solution_limits, cpu=int(run.timeout) + 1)
        return {"launch": {"kind": "plain", "prefix": [], "python": "/deepgym/no-fallback",
                           "uid": run.container.uids[1], "limits": limits,
                           "zygote": f"{agent.CTL}/zygote.sock",
                           # the container holds one run: its CPU counts a request's (v1, v2)
                           "cpu_whole": ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"]},
                "solution_dir": f"{agent.SOL}/work", "limits": dict(self.verifier_limits)}

    def run(self, sandbox: Sandbox, command: Sequence[str], *, timeout: float,
            stdin: bytes | None = None, env: Mapping[str, str] | None = None,
            cancel: CancelSignal | None = None) -> CommandResult:
        run: _Run = sandbox.handle
        box = run.container
        environ = {"PATH": PATH, "LANG": "C.UTF-8", "HOME": f"{agent.RUN}/work",
                   "TMPDIR": "/tmp"}
        environ.update(env or {})
        command = list(command)
        runner = command == [self.python, "-I", "-S", "-B", RUNNER]
        step = command == [self.python, "-I", "-S", "-B", STEP]  # a session's step
        run.session = run.session or step
        # A session's work directory lasts from its first request to its sandbox's end.
        header = {"op": "run", "files": list(run.files), "env": environ,
                  "timeout": float(timeout), "argv": None if runner or step else command,
                  "program": "step" if step else None,
                  "fresh": run.requests == 0, "keep_solution": run.session}
        run.requests += 1
        started = time.monotonic()
        try:
            reply, out, err, in_play = box.run(header, [stdin or b"", *run.files.values()],
                                              timeout + REPLY_GRACE,
                                              cancel.fileno() if cancel is not None else None)
        except ContainerGone as exc:
            return self._lost(sandbox, box, exc, getattr(exc, "in_play", []), started)
        except TimeoutError:
            box.healthy = False
            raise SandboxError(f"the agent in container {box.name} did not answer within "
                               f"{timeout + REPLY_GRACE:.0f}s; the answer was not judged",
                               sandbox_id=sandbox.id) from None
        if not reply.get("clean"):
            logger.warning("container %s could not prove itself clean after a run (%s); "
                           "replacing it", box.name, "; ".join(reply.get("unclean") or []))
            box.healthy = False
        if not reply.get("zygote_alive", True):
            raise SandboxError("the solution zygote in the container died during the run; "
                               "the answer was not judged", sandbox_id=sandbox.id)
        return CommandResult(exit_code=reply.get("exit_code"), stdout=out, stderr=err,
                             timed_out=bool(reply.get("timed_out")),
                             duration=time.monotonic() - started)

    def _lost(self, sandbox: Sandbox, box: WarmContainer, exc: ContainerGone,
              in_play: list[str], started: float) -> CommandResult:
        """The container's channel broke mid-run: out of memory after the solution was in
        play is the answer's doing; anything else (removed, engine stopped) is not."""
        box.healthy = False
        state = box.diagnose()
        if state.get("OOMKilled") and in_play:
            return CommandResult(exit_code=137, stdout=("\n".join(in_play) + "\n").encode(),
                                 stderr=b"the container was killed for memory (OOM)",
                                 duration=time.monotonic() - started)
        what = state.get("error") or f"status {state.get('Status')!r}, exit code " \
                                      f"{state.get('ExitCode')!r}"
        if "error" in state and "No such container" not in state["error"]:
            raise ProviderConnectionError(f"lost container {box.name} and the Docker engine "
                                          f"({exc}; {what})", sandbox_id=sandbox.id) from exc
        raise SandboxDiedError(f"container {box.name} went away during the run ({exc}; "
                               f"{what}); the answer was not judged",
                               sandbox_id=sandbox.id) from exc

    def destroy(self, sandbox: Sandbox) -> None:
        run: _Run = sandbox.handle
        run.files.clear()
        self._give_back(run.container)

    def close(self) -> None:
        """Remove every container of this provider (idle, in use, being removed after a
        failure, or still starting) and return once they are gone; raises SandboxError
        naming the containers it could not remove."""
        with self._lock:
            self._closed = True
            if self._tasks is not None:
                self._tasks.close()
            boxes = list(self._live)
            self._live.clear()
            self._idle.clear()
            api = self._api
        for box in boxes:  # a run in one sees its channel end, and has no verdict
            self._teardown.spawn(box.name, _remove_then_close, box)
        left = self._teardown.finish(self.api_timeout + self.settings.start_timeout)
        if api is not None and self._started_any:  # and any it made that it kept no handle on
            left.update(remove_labelled(api, self.instance))
        if left:
            raise SandboxError("the docker provider could not remove its containers: " + "; "
                               .join(f"{name} ({why})" for name, why in sorted(left.items())))

    def containers(self) -> list[str]:
        """Names of this provider's live containers (for tests and diagnosis)."""
        with self._lock:
            return sorted(box.name for box in self._live)
