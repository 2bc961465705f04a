"""A fresh container of a task's own image, for one run of a repository task.

Unlike the warm containers of single-file answers (``container``), a repository task runs in
the image that holds its code base, and a run changes that code base: every run gets a new
container, removed when the run ends, so nothing a run leaves (a file, a process, a loop
waiting for the next run) can reach another. The container has no network, memory, pids and
CPU limits, a size-limited tmpfs ``/tmp``, no new privileges and only the capabilities root
needs to apply patches; its file system is otherwise the image's, writable. Commands run by
``docker exec`` as the user given (the tests as an unprivileged one), each bounded: at its
deadline the whole container is killed, since a process a command started may have left the
command's process group. A command's output (stdout and stderr together) goes to a file of its
own in the container, copied out when it ends, up to a limit (its last bytes: a test log's
summary is at its end): the engine's attach stream drops the output of a command that ends
while the machine is loaded (seen here, with dockerd logging "stream copy error: ... file
already closed"), and a lost test log would grade a right answer 0.

Time: every engine call is bounded. The client's own timeout (``api.timeout``) bounds the calls
whose cost is ours; a call that moves data an answer made (its work directory, a command's
output) is given :meth:`TaskContainer.transfer_timeout` for the size admitted, and overrunning
it raises :class:`TransferTimedOut`, which the caller judges as the answer's (the SDK's own
archive download has no timeout at all once its body starts: see ``transfers``).

Example:
    box = TaskContainer.start(api, "deepgym-task:ab12...", TaskLimits(), labels)
    box.put("/deepgym", {"answer.diff": diff})
    box.exec(["git", "apply", "/deepgym/answer.diff"], user="0", timeout=60, workdir="/testbed")
    box.remove()
"""

from __future__ import annotations

import io
import secrets
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from deepgym_ray.exceptions import RunCancelledError, SandboxError
from deepgym_ray.sandboxes.base import CommandResult
from deepgym_ray.sandboxes.cancel import CancelSignal
from deepgym_ray.sandboxes.docker import transfers
from deepgym_ray.sandboxes.docker.container import LABEL, PATH, remove_quietly
from deepgym_ray.sandboxes.docker.engine_errors import engine_error
from deepgym_ray.sandboxes.docker.transfers import ArchiveTooLarge, TransferTimedOut

__all__ = ["ArchiveTooLarge", "TaskContainer", "TaskContainers", "TaskLimits",
           "TransferTimedOut"]

DISK_POLL = 1.0  # seconds between looks at what a running command has written
# How long the engine may take to measure a container's own layer. It walks every file there
# (about 10 us each, measured here): an answer that leaves millions of files would make each
# look take minutes and, timed out, see nothing; two looks in a row past this are an overrun.
DISK_QUERY_TIMEOUT = 30.0
EXIT_POLL = 0.05  # seconds between asking whether a command whose stream ended has ended
# Where commands' output files go: on the container's own layer (it survives a kill, and
# counts against ``disk_mb``); anyone may create a file there, nobody but root list it.
OUTPUT_DIR = "/.deepgym-output"
# The command, its stdout and stderr to the file named first.
_TO_FILE = 'out=$1; shift; exec "$@" >"$out" 2>&1'

# Root applies patches to files it may not own, and makes the run's own directory.
TASK_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER"]


@dataclass(frozen=True)
class TaskLimits:
    """Limits of one task container (all its processes together)."""

    memory_mb: int = 4096
    pids_limit: int = 512
    cpus: float = 1.0
    tmp_mb: int = 512
    output_bytes: int = 4 << 20
    # What the container may write to its own layer (the engine here cannot set a quota:
    # overlay2 on ext4): watched while a command runs, the container killed past it.
    disk_mb: int = 2048


class TaskContainer:
    """One running container of a task image (see the module docstring)."""

    def __init__(self, api: Any, cid: str, name: str, limits: TaskLimits) -> None:
        self.api, self.id, self.name, self.limits = api, cid, name, limits
        #: Set when a command wrote more than ``limits.disk_mb`` (or left more files than the
        #: engine can measure) and the container was killed; ``overrun`` says which.
        self.disk_exceeded = False
        self.overrun = ""
        self._slow_looks = 0
        self.cancel: CancelSignal | None = None

    @classmethod
    def start(cls, api: Any, image: str, limits: TaskLimits,
              labels: Mapping[str, str]) -> TaskContainer:
        """Create and start a container of ``image`` that waits for commands."""
        name = f"deepgym-task-{secrets.token_hex(6)}"
        host_config = api.create_host_config(
            init=True, network_mode="none", mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.pids_limit,
            nano_cpus=int(limits.cpus * 1e9),
            tmpfs={path: f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"
                   for path in ("/tmp", "/var/tmp")},
            cap_drop=["ALL"], cap_add=TASK_CAPS, security_opt=["no-new-privileges"])
        created = api.create_container(
            image, command=["sleep", "infinity"], name=name, user="0",
            environment={"PATH": PATH, "LANG": "C.UTF-8"}, entrypoint=[],
            labels={LABEL: "docker", **labels}, host_config=host_config)
        box = cls(api, created["Id"], name, limits)
        try:
            api.start(box.id)
            box.put_tar("/", _directory_tar(OUTPUT_DIR.lstrip("/"), 0o1733))
        except BaseException:
            box.remove()
            raise
        return box

    def put(self, directory: str, files: Mapping[str, bytes], mode: int = 0o600,
            directory_mode: int = 0o700) -> None:
        """Write ``files`` (name -> content) into ``directory`` (an absolute path whose parent
        exists; made if missing), owned by root with ``mode``; one call to the engine."""
        top = PurePosixPath(directory).relative_to("/")
        names = [top / name for name in files]
        # ``directory`` and what is below it; never its parents (their modes are the image's)
        folders = {parent for name in names for parent in name.parents
                   if parent == top or top in parent.parents}
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for folder in sorted(folders, key=lambda f: len(f.parts)):
                archive.addfile(_folder(str(folder), directory_mode))
            for name, content in zip(names, files.values(), strict=True):
                info = tarfile.TarInfo(str(name))
                info.size, info.mode, info.mtime = len(content), mode, int(time.time())
                archive.addfile(info, io.BytesIO(content))
        self.put_tar("/", buffer.getvalue())

    def put_tar(self, directory: str, data: bytes, timeout: float | None = None) -> None:
        """Unpack the tar archive ``data`` into ``directory``, within ``timeout`` seconds (a
        budget from :meth:`transfer_timeout`: TransferTimedOut past it) or the client's."""
        transfers.put_archive(self.api, self.id, directory, data, timeout, self.name)

    def transfer_timeout(self, *, entries: int = 0, components: int = 0,
                         data_bytes: int = 0) -> float:
        """The time allowed to move a tree of this size (``transfers.transfer_timeout``)."""
        return transfers.transfer_timeout(self.api.timeout, entries=entries,
                                          components=components, data_bytes=data_bytes)

    def open_archive(self, path: str, timeout: float | None = None
                     ) -> AbstractContextManager[io.RawIOBase | None]:
        """The engine's archive of ``path`` as a file read while it streams, within
        ``timeout`` (``transfers.open_archive``)."""
        return transfers.open_archive(self.api, self.id, path, timeout, self.name)

    def read_file(self, path: str, limit: int) -> bytes | None:
        """The regular file ``path``'s bytes, or None (``transfers.read_file``)."""
        return transfers.read_file(self.api, self.id, path, limit, self.name)

    def freeze(self) -> None:
        """Stop every process in the container (paused; killed where the engine cannot pause
        it): nothing it runs changes its files or writes to its disk while they are copied
        out (the engine copies from a paused or stopped container). An engine that can do
        neither says so at the next call."""
        try:
            self.api.pause(self.id)
        except Exception:  # noqa: BLE001 - whatever kept it from pausing, a kill stops it
            self.kill()

    def exec(self, argv: Sequence[str], *, user: str, timeout: float, workdir: str = "/",
             environment: Mapping[str, str] | None = None,
             cancel: CancelSignal | None = None) -> CommandResult:
        """Run ``argv`` and return its exit code and output (stdout and stderr together, in
        ``stdout``; through a file, see the module docstring). At ``timeout`` the container is
        killed: ``timed_out`` is then True. The engine failing the call is a SandboxError
        (never the answer's doing); ``cancel`` set kills the container and raises
        RunCancelledError (default: the container's ``cancel``, the signal of the run it
        serves)."""
        watch = cancel if cancel is not None else self.cancel
        try:
            return self._exec(argv, user, timeout, workdir, environment, watch)
        except (SandboxError, RunCancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 - SDK and transport errors
            raise engine_error(exc) from exc

    def _exec(self, argv: Sequence[str], user: str, timeout: float, workdir: str,
              environment: Mapping[str, str] | None,
              cancel: CancelSignal | None) -> CommandResult:
        started = time.monotonic()
        environ = {"PATH": PATH, "LANG": "C.UTF-8", "HOME": "/tmp", **(environment or {})}
        out = f"{OUTPUT_DIR}/{secrets.token_hex(8)}"
        exec_id = self.api.exec_create(self.id, ["sh", "-c", _TO_FILE, "sh", out, *argv],
                                       user=user, workdir=workdir, environment=environ,
                                       stdout=True, stderr=True)["Id"]
        stream = self.api.exec_start(exec_id, stream=True, demux=False)
        # Only what comes before the redirection (the shell unable to make the file) or
        # around it comes this way.
        said = _TailBuffer(self.limits.output_bytes)
        reader = threading.Thread(target=said.drain, args=(stream,), daemon=True)
        reader.start()
        deadline = started + timeout
        code, ended, next_look = None, False, started + DISK_POLL
        while not ended and time.monotonic() < deadline:
            if reader.is_alive():
                reader.join(min(DISK_POLL, max(deadline - time.monotonic(), 0.0)))
            elif said.error is not None:
                raise said.error
            else:  # the stream ended, and with it the command, unless the engine cut it short
                state = self.api.exec_inspect(exec_id)
                code = state.get("ExitCode")
                # Not running and no exit code: not started yet (the stream can be cut first).
                ended = not state.get("Running") and code is not None
                if not ended:
                    time.sleep(EXIT_POLL)
            if cancel is not None and cancel.is_set():
                self.kill()
                raise RunCancelledError("the run's caller gave up on it; its container was "
                                        "killed and nothing was judged", sandbox_id=self.name)
            if not ended and time.monotonic() >= next_look:
                next_look = time.monotonic() + DISK_POLL
                if self._over_disk():
                    self.disk_exceeded = True
                    break
        if not ended:
            self.kill()
            reader.join(30)
        return CommandResult(exit_code=code if ended else None,
                             stdout=said.value() + self._output(out),
                             timed_out=not ended and not self.disk_exceeded,
                             duration=time.monotonic() - started)

    def _output(self, path: str) -> bytes:
        """The last ``output_bytes`` of the output file ``path`` (b"" when there is none, or
        the command put something else in its place). The command may have written up to
        ``disk_mb`` there: the copy is given the time for that (TransferTimedOut past it)."""
        tail = _TailBuffer(self.limits.output_bytes)
        budget = self.transfer_timeout(data_bytes=self.limits.disk_mb << 20)
        with self.open_archive(path, budget) as body:
            if body is None:
                return b""
            try:
                with tarfile.open(fileobj=io.BufferedReader(body), mode="r|") as tar:
                    member = tar.next()
                    found = tar.extractfile(member) if member and member.isfile() else None
                    if found is not None:
                        tail.drain(iter(lambda: found.read(1 << 20), b""))
            except tarfile.TarError as exc:
                raise engine_error(exc) from exc
        if isinstance(tail.error, SandboxError):
            raise tail.error
        if tail.error is not None:
            raise engine_error(tail.error) from tail.error
        return tail.value()

    def _over_disk(self) -> bool:
        """Whether the container's own layer is past ``disk_mb``, or could not be measured
        twice in a row within DISK_QUERY_TIMEOUT (sets ``overrun``). An engine that fails
        the look otherwise says nothing here: the run's end will say it."""
        url = self.api._url("/containers/{0}/json", self.id)
        try:
            found = self.api._result(self.api._get(url, params={"size": 1},
                                                   timeout=DISK_QUERY_TIMEOUT), True)
        except Exception as exc:  # noqa: BLE001 - the engine away: the run's end will say so
            self._slow_looks = self._slow_looks + 1 if transfers.timed_out(exc) else 0
            if self._slow_looks >= 2:
                self.overrun = (f"left more files in the container than the engine can "
                                f"measure in {DISK_QUERY_TIMEOUT:g}s")
            return bool(self.overrun)
        self._slow_looks = 0
        if int(found.get("SizeRw") or 0) > self.limits.disk_mb << 20:
            self.overrun = f"wrote more than {self.limits.disk_mb} MB to the container's disk"
        return bool(self.overrun)

    def state(self) -> dict[str, Any]:
        """The container's state (``OOMKilled``, ``Status``, ...); ``{"error": ...}`` when the
        engine cannot say."""
        try:
            return self.api.inspect_container(self.id).get("State") or {}
        except Exception as exc:  # noqa: BLE001 - removed, or the engine is away
            return {"error": str(exc)[:300]}

    def kill(self) -> None:
        try:
            self.api.kill(self.id)
        except Exception:  # noqa: BLE001 - stopped already; remove() makes sure
            pass

    def remove(self) -> str | None:
        """Remove the container and everything in it; None once it is gone, else why not."""
        return remove_quietly(self.api, self.id)


class _TailBuffer:
    """The last ``limit`` bytes of a stream, and how many were dropped before them."""

    def __init__(self, limit: int) -> None:
        self.limit, self.dropped = limit, 0
        self.data = bytearray()
        self.error: BaseException | None = None

    def drain(self, stream: Any) -> None:
        try:
            for chunk in stream:
                self.data += chunk
                if len(self.data) > 2 * self.limit:  # trim now and then, not per chunk
                    self._trim()
        except Exception as exc:  # noqa: BLE001 - the engine went away: the caller decides
            self.error = exc

    def _trim(self) -> None:
        cut = len(self.data) - self.limit
        if cut > 0:
            del self.data[:cut]
            self.dropped += cut

    def value(self) -> bytes:
        self._trim()
        head = f"[{self.dropped} bytes of output left out]\n".encode() if self.dropped else b""
        return head + bytes(self.data)


def _folder(name: str, mode: int) -> tarfile.TarInfo:
    """A tar entry of the directory ``name``, owned by root, with ``mode``."""
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info


def _directory_tar(name: str, mode: int) -> bytes:
    """A tar archive of one empty directory ``name``, owned by root, with ``mode``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(_folder(name, mode))
    return buffer.getvalue()


class TaskContainers:
    """A provider's task containers: each run takes a fresh one and gives it back to be
    removed on a background thread. One spare per image and limits is started ahead, while
    the run that took the last one goes on, so a run does not wait for a container to start
    (a spare has never run anything: it is as fresh as one started for the run).

    ``teardown`` (the provider's) tracks starts and removals, so the provider's ``close``
    waits for them; ``close`` here removes the spares.
    """

    def __init__(self, api: Any, labels: Mapping[str, str], teardown: Any) -> None:
        self.api, self.labels, self.teardown = api, dict(labels), teardown
        self._spares: dict[tuple[str, TaskLimits], TaskContainer] = {}
        self._starting: set[tuple[str, TaskLimits]] = set()
        self._lock = threading.Lock()
        self._closed = False

    def take(self, image: str, limits: TaskLimits) -> TaskContainer:
        """A fresh container of ``image``; a spare for the next run starts behind it."""
        key = (image, limits)
        with self._lock:
            box = self._spares.pop(key, None)
        if box is None:
            with self.teardown.creating():
                box = TaskContainer.start(self.api, image, limits, self.labels)
        self._start_spare(key)
        return box

    def give_back(self, box: TaskContainer) -> None:
        """Remove ``box`` on a background thread (the run need not wait for the engine)."""
        self.teardown.spawn(box.name, remove_quietly, self.api, box.id)

    def _start_spare(self, key: tuple[str, TaskLimits]) -> None:
        with self._lock:
            if self._closed or key in self._spares or key in self._starting:
                return
            self._starting.add(key)
        threading.Thread(target=self._spare, args=(key,), daemon=True).start()

    def _spare(self, key: tuple[str, TaskLimits]) -> None:
        box = None
        try:
            with self.teardown.creating():
                box = TaskContainer.start(self.api, key[0], key[1], self.labels)
        except Exception:  # noqa: BLE001 - the next run starts its own and says why
            pass
        with self._lock:
            self._starting.discard(key)
            keep = box is not None and not self._closed and key not in self._spares
            if keep:
                self._spares[key] = box
        if box is not None and not keep:
            self.give_back(box)

    def close(self) -> None:
        """Remove the spares (the provider's close then waits for every removal)."""
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares.values()), {}
        for box in spares:
            self.give_back(box)
