"""One warm container and the host's channel to the agent inside it.

:meth:`WarmContainer.start` creates the container (no network, memory, pids and CPU limits, a
read-only root unless told otherwise, tmpfs work areas, every capability dropped but the few the
agent needs, no new privileges, docker's ``init``), attaches to its stdin and stdout *before*
starting it (so no byte of the agent's channel is lost), sends the agent's source and its setup
(the two uids, the judge files), and waits for ``ready``. :meth:`WarmContainer.run` sends one
run and reads frames until its result (sending ``cancel`` when the run's cancel signal is set:
the agent then kills the run as at its deadline and answers as usual); a broken channel raises
:class:`ContainerGone`, and :meth:`WarmContainer.diagnose` then says why (out of memory,
removed, the engine away).

The attach stream multiplexes the container's stdout and stderr in 8-byte-headed frames (no
TTY); the agent's own frames (``agent.pack``) travel inside its stdout.

Example:
    box = WarmContainer.start(api, image, settings, files)
    box.run({"op": "run", ...}, [stdin], timeout=10)
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from deepgym_ray.sandboxes.docker import agent

logger = logging.getLogger(__name__)

LABEL = "deepgym.provider"
OWNER_LABEL = "deepgym.owner"
INSTANCE_LABEL = "deepgym.instance"  # which provider made it (see DockerProvider.instance)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What the agent needs as root: own files and directories, become the two uids, kill their
# processes, and let a session verifier's runner read the agent's whole work directory for the
# copy it judges (the runner gives that up before any verifier code runs: deepgym_workcopy).
# Nothing else (no raw sockets, no mounts, no ptrace, no IPC override).
AGENT_CAPS = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "SETUID", "SETGID", "KILL"]
# Time the agent gets, once told to cancel a run, to kill it, clean up and answer.
CANCEL_GRACE = 20.0
_AGENT_SOURCE = open(agent.__file__, "rb").read()  # noqa: SIM115 - read once at import


class ContainerGone(Exception):
    """The channel to the agent broke: the container (or the engine) is gone."""


@dataclass
class ContainerSettings:
    """How every container of a provider is made (see ``DockerProvider`` for the meaning)."""

    memory_mb: int = 2048
    pids_limit: int = 256
    cpus: float = 1.0
    read_only: bool = True
    tmpfs_mb: int = 256
    tmpfs_files: int = 20000  # inodes per work area: a flood of empty files hits this
    start_timeout: float = 60.0
    labels: dict[str, str] = field(default_factory=dict)


def _fresh_uid() -> int:
    """A uid far from real users, so no other process on the machine shares its limits."""
    return (1 << 20) + secrets.randbelow(1 << 29)


class WarmContainer:
    """A running container with its agent ready for runs (see the module docstring)."""

    def __init__(self, api: Any, cid: str, name: str, image: str, uids: tuple[int, int],
                 sock: socket.socket, response: Any) -> None:
        self.api, self.id, self.name, self.image, self.uids = api, cid, name, image, uids
        self._sock, self._response = sock, response  # the response keeps the socket open
        self._raw = bytearray()  # attach-stream bytes not yet demultiplexed
        self._out = bytearray()  # the agent's stdout: its frames
        self.runs = 0
        self.healthy = True

    @classmethod
    def start(cls, api: Any, image: str, settings: ContainerSettings,
              files: dict[str, bytes]) -> WarmContainer:
        """Create, attach, start and set up a container; raises the SDK's errors as they come
        (the provider maps them), or ContainerGone when the agent never became ready."""
        name = f"deepgym-{os.getpid()}-{secrets.token_hex(4)}"
        uids = (_fresh_uid(), _fresh_uid())
        tmpfs = f"size={settings.tmpfs_mb}m,nr_inodes={settings.tmpfs_files}"
        # The verifier's own: room for a session verifier's copy of the agent's work (which
        # fills at most the work area above) beside the verifier's files, whatever the agent
        # left.
        run_tmpfs = f"size={2 * settings.tmpfs_mb}m,nr_inodes={2 * settings.tmpfs_files}"
        host_config = api.create_host_config(
            init=True, network_mode="none", mem_limit=f"{settings.memory_mb}m",
            memswap_limit=f"{settings.memory_mb}m", pids_limit=settings.pids_limit,
            nano_cpus=int(settings.cpus * 1e9), read_only=settings.read_only,
            tmpfs={"/deepgym": tmpfs, agent.RUN: run_tmpfs, "/tmp": tmpfs},
            cap_drop=["ALL"], cap_add=AGENT_CAPS,
            security_opt=["no-new-privileges"], shm_size=64 << 20)
        created = api.create_container(
            image, command=["python3", "-I", "-S", "-B", "-c", agent.BOOT], name=name,
            user="0", environment={"PATH": PATH, "LANG": "C.UTF-8"}, working_dir="/",
            # stdin open and not detached: StdinOnce, so the agent sees EOF (and the container
            # stops) when the host that attached goes away.
            stdin_open=True, detach=False,
            labels={LABEL: "docker", **settings.labels},
            host_config=host_config)
        cid = created["Id"]
        try:
            sock_io = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                     "stream": 1})
            sock = getattr(sock_io, "_sock", sock_io)
            box = cls(api, cid, name, image, uids, sock, getattr(sock_io, "_response", None))
            api.start(cid)
            box._send(len(_AGENT_SOURCE).to_bytes(8, "big") + _AGENT_SOURCE)
            setup = {"op": "setup", "uids": list(uids), "files": list(files),
                     "read_only": settings.read_only}
            box._send(agent.pack(setup, files.values()))
            header, _ = box._frame(time.monotonic() + settings.start_timeout)
            if header.get("kind") != "ready":
                raise ContainerGone(f"the agent answered {header!r} instead of 'ready'")
        except BaseException:
            remove_quietly(api, cid)
            raise
        logger.debug("container %s (%s) ready: python %s", name, image, header.get("version"))
        return box

    # --- the channel ----------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        try:
            self._sock.settimeout(30)
            self._sock.sendall(data)
        except OSError as exc:
            self.healthy = False
            raise ContainerGone(f"cannot write to the container's agent: {exc}") from exc

    def _fill(self, deadline: float, wake: int | None = None) -> bool:
        """Read more of the attach stream (at most until ``deadline``) and demultiplex it;
        False, having read nothing, when the descriptor ``wake`` turned readable first."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        waiting = [self._sock] if wake is None else [self._sock, wake]
        ready, _, _ = select.select(waiting, [], [], left)
        if not ready:
            raise TimeoutError
        if self._sock not in ready:
            return False
        try:
            chunk = self._sock.recv(1 << 20)
        except OSError as exc:
            self.healthy = False
            raise ContainerGone(f"the container's channel broke: {exc}") from exc
        if not chunk:
            self.healthy = False
            raise ContainerGone("the container's agent closed its channel")
        self._raw += chunk
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                break
            stream, payload = self._raw[0], bytes(self._raw[8:8 + size])
            del self._raw[:8 + size]
            if stream == 1:
                self._out += payload
            elif payload.strip():
                logger.warning("container %s: %s", self.name,
                               payload.decode("utf-8", "replace").strip()[-2000:])
        return True

    def _frame(self, deadline: float,
               wake: int | None = None) -> tuple[dict[str, Any], list[bytes]] | None:
        """The agent's next frame; None when ``wake`` turned readable before it came."""
        while True:
            try:
                parsed = agent.unpack(self._out)
            except ValueError as exc:
                self.healthy = False
                raise ContainerGone(f"the agent sent a malformed frame: {exc}") from exc
            if parsed is not None:
                header, blobs, rest = parsed
                self._out = bytearray(rest)
                return header, blobs
            if not self._fill(deadline, wake):
                return None

    def run(self, header: dict[str, Any], blobs: list[bytes], timeout: float,
            wake: int | None = None) -> tuple[dict[str, Any], bytes, bytes, list[str]]:
        """One run: (result header, stdout, stderr, in-play lines seen). ContainerGone when
        the channel breaks; TimeoutError when the agent does not answer by ``timeout``. Once
        the descriptor ``wake`` is readable (the run was given up) the agent is told to
        cancel the run, and has ``CANCEL_GRACE`` seconds to answer."""
        self.runs += 1
        in_play: list[str] = []
        self._send(agent.pack(header, blobs))
        deadline = time.monotonic() + timeout
        while True:
            try:
                frame = self._frame(deadline, wake)
                if frame is None:
                    self._send(agent.pack({"op": "cancel"}))
                    wake, deadline = None, min(deadline, time.monotonic() + CANCEL_GRACE)
                    continue
            except (ContainerGone, TimeoutError) as exc:
                exc.in_play = in_play  # type: ignore[attr-defined]
                raise
            reply, out = frame
            if reply.get("kind") == "in_play":
                in_play.append(str(reply.get("line", "")))
            elif reply.get("kind") == "result":
                return reply, out[0], out[1], in_play
            else:
                self.healthy = False
                raise ContainerGone(f"the agent answered {reply.get('kind')!r}: "
                                    f"{reply.get('details', '')}")

    def idle_and_alive(self) -> bool:
        """Whether the container still waits for work (its channel is open and silent)."""
        if not self.healthy:
            return False
        try:
            ready, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            ready = [self._sock]
        if ready:  # an idle agent says nothing: EOF, or something wrong
            self.healthy = False
        return self.healthy

    def diagnose(self) -> dict[str, Any]:
        """The container's state as the engine reports it (empty when it cannot be read)."""
        try:
            return self.api.inspect_container(self.id).get("State") or {}
        except Exception as exc:  # noqa: BLE001 - removed, or the engine is away
            return {"error": f"{type(exc).__name__}: {exc}"}

    def close(self) -> None:
        self.healthy = False
        try:
            # shutdown first: it wakes a thread waiting on the socket (it reads the end of the
            # stream), where close alone would leave that thread waiting until its deadline
            # (stress series 19: the engine had removed the container, and not yet ended
            # its attach stream, when close ran).
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        if self._response is not None:
            try:
                self._response.close()
            except Exception:  # noqa: BLE001, S110 - already broken: nothing to release
                pass

    def remove(self) -> str | None:
        """Close the channel and remove the container: None once it is gone, else why not."""
        self.close()
        return remove_quietly(self.api, self.id)


def remove_quietly(api: Any, cid: str) -> str | None:
    """Remove a container, whatever state it is in (force: a running one is killed first;
    the call returns once it is gone). None when it is gone (or was already); else why not,
    also logged, never raised."""
    try:
        api.remove_container(cid, force=True)
    except Exception as exc:  # noqa: BLE001 - gone already, or the engine is away
        if "No such container" in str(exc) or "404" in str(exc):
            return None
        logger.warning("could not remove container %s: %s", cid[:12], exc)
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return None


def remove_stale(api: Any) -> None:
    """Remove containers of providers on this host whose process has died: an actor killed
    without a chance to close its provider (SIGKILL, a lost node's restart) leaves them
    stopped, and only this sweep, run by the next provider on the host, takes them."""
    host = socket.gethostname()
    try:
        found = api.containers(all=True, filters={"label": f"{LABEL}=docker"})
    except Exception:  # noqa: BLE001 - best effort; the next provider tries again
        return
    for item in found:
        owner = (item.get("Labels") or {}).get(OWNER_LABEL, "")
        name, _, pid = owner.rpartition(":")
        if name == host and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            remove_quietly(api, item["Id"])


def remove_labelled(api: Any, instance: str) -> dict[str, str]:
    """Remove every container of provider ``instance`` still there (one whose start failed
    before a handle was kept, one whose removal failed before) and list again: name -> why
    for each one left."""
    wanted = {"label": f"{INSTANCE_LABEL}={instance}"}
    try:
        for item in api.containers(all=True, filters=wanted):
            remove_quietly(api, item["Id"])
        found = api.containers(all=True, filters=wanted)
    except Exception as exc:  # noqa: BLE001 - the engine is away: nothing can be proven
        return {"(listing)": f"cannot list the provider's containers: {exc}"}
    return {(item.get("Names") or [item["Id"][:12]])[0].lstrip("/"):
            "still there after its removal" for item in found}
