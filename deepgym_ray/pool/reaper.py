"""A watchdog that removes every process a command started once the command is gone.

Ray's embedded instance runs as a dozen processes (GCS, raylet, dashboard and runtime-env
agents, workers); when the command that started it is killed with SIGKILL, nothing of ours can
run, and some of them (the agents ignore SIGTERM) stay. :func:`start_reaper` forks a small
watchdog first. Every process the command starts from then on inherits an environment
variable naming this command (``DEEPGYM_REAPER_TAG``); when the command ends, however it ends,
the watchdog sees its pipe close and SIGKILLs every process that carries the tag, until none is
left. Processes of a cluster the command only joined never carry it, so they are left alone.

Example:
    from deepgym_ray.pool.reaper import start_reaper
    start_reaper()   # first thing in a command that may start Ray
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time

__all__ = ["TAG_VARIABLE", "start_reaper", "tagged_processes"]

logger = logging.getLogger(__name__)

TAG_VARIABLE = "DEEPGYM_REAPER_TAG"
_started = False


def tagged_processes(tag: str) -> list[int]:
    """Pids of the processes whose environment carries ``tag``, or a tag below it (this
    process excepted)."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                entries = handle.read().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        # A nested command's tag extends its parent's (PARENT/CHILD): a command's processes
        # include those of the commands it started.
        if any(e == needle or e.startswith(needle + b"/") for e in entries):
            found.append(int(name))
    return found


def _reap(tag: str, rounds: int = 50) -> None:
    """SIGKILL every tagged process until a pass finds none (a dying parent may fork)."""
    for _ in range(rounds):
        pids = tagged_processes(tag)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
        time.sleep(0.1)


def start_reaper() -> str | None:
    """Fork the watchdog (once per process; Linux only). Returns the tag, or None where
    ``/proc`` is missing."""
    global _started
    if _started or not os.path.isdir("/proc"):
        return os.environ.get(TAG_VARIABLE) if _started else None
    _started = True
    # A tag of its own, below the tag of a command that started this one: reaping this
    # command's processes must never reach its parent's (an embedded Ray the parent uses).
    inherited = os.environ.get(TAG_VARIABLE)
    tag = f"{inherited}/{secrets.token_hex(8)}" if inherited else secrets.token_hex(8)
    os.environ[TAG_VARIABLE] = tag
    read_end, write_end = os.pipe()  # not inheritable: only this process holds the write end
    pid = os.fork()
    if pid == 0:  # the watchdog: its own session, so a signal to the command's group spares it
        try:
            os.setsid()
            os.close(write_end)
            # Not the command's stdio: whoever reads its output (a pipe, `| tee`) sees the
            # end when the command ends, not when the watchdog's last sweep does.
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.close(devnull)
            except OSError:  # keep them: reaping matters more
                pass
            os.environ.pop(TAG_VARIABLE, None)
            while os.read(read_end, 1):
                pass
            _reap(tag)
        finally:
            os._exit(0)
    os.close(read_end)
    os.set_inheritable(write_end, False)
    return tag
