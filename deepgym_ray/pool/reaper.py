"""A watchdog that removes every process a command started once the command is gone.

Ray's embedded instance runs as a dozen processes (GCS, raylet, dashboard and runtime-env
agents, workers); when the command that started it is killed with SIGKILL, nothing of ours can
run, and some of them (the agents ignore SIGTERM) stay. :func:`start_reaper` forks a small
watchdog first. Every process the command starts from then on inherits an environment
variable naming this command (``DEEPGYM_REAPER_TAG``); when the command ends, however it ends,
the watchdog sees its pipe close and SIGKILLs every process that carries the tag, until none is
left. Ray's agents rewrite their process title over their environment (``setproctitle``), so
the tag cannot be read there; they are found instead by the log files they hold open for
writing in the session directory of a Ray this command started (Ray names it after the starting
process's pid and the time; an older session of a reused pid is not ours), and by having started
after the command. Whoever only reads or walks that directory (``rm -r`` of a temp dir, the
script that ran the command) is not Ray's and is left alone. Processes of a cluster the
command only joined carry neither, so they are left alone. The watchdog holds none of the
command's descriptors: a socket or pipe the command's helpers watch for its end (the local
sandbox's zygote, fork server and janitor) ends with the command, not with the watchdog.

Example:
    from deepgym_ray.pool.reaper import start_reaper
    start_reaper()   # first thing in a command that may start Ray
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import time
from datetime import datetime

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


# Ray's session directories: session_<local date and time>_<microseconds>_<starter's pid>.
_SESSION = re.compile(r"/session_(\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+)_(\d+)(?:/|$)")


def session_processes(starter: int, since: float) -> list[int]:
    """Pids of the processes started at ``since`` (a Unix time) or later that hold a file open
    for writing in a Ray session directory that process ``starter`` made since then: Ray's own
    processes write their logs there. A process that only reads or walks the directory (``rm
    -r`` of the temp dir, a ``tail`` of a log, the script that ran the command) is not Ray's."""
    me, found = os.getpid(), []
    booted = _boot_time()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if booted is not None and _started_at(name, booted) < since - 1:
                continue
            for fd in os.listdir(f"/proc/{name}/fd"):
                match = _SESSION.search(os.readlink(f"/proc/{name}/fd/{fd}"))
                if match and int(match[2]) == starter and _made_since(match[1], since) \
                        and _writes(name, fd):
                    found.append(int(name))
                    break
        except (OSError, ValueError):  # gone, or a descriptor closed meanwhile: the next pass
            continue
    return found


def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _started_at(pid: str, booted: float) -> float:
    """The Unix time process ``pid`` started (its stat's starttime, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def _writes(pid: str, fd: str) -> bool:
    """Whether descriptor ``fd`` of ``pid`` is open for writing."""
    with open(f"/proc/{pid}/fdinfo/{fd}") as handle:
        for line in handle:
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    return False


def _made_since(stamp: str, since: float) -> bool:
    try:
        made = datetime.strptime(stamp, "%Y-%m-%d_%H-%M-%S_%f").timestamp()
    except ValueError:
        return False
    return made >= since - 1  # the name's clock is the same; a second of slack for rounding


def _reap(tag: str, starter: int = 0, since: float = 0.0, rounds: int = 50) -> None:
    """SIGKILL every tagged process, and every process of a Ray session ``starter`` made
    since ``since``, until a pass finds none (a dying parent may fork)."""
    for _ in range(rounds):
        pids = tagged_processes(tag)
        if starter:
            pids += session_processes(starter, since)
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
    command, since = os.getpid(), time.time()
    pid = os.fork()
    if pid == 0:  # the watchdog: its own session, so a signal to the command's group spares it
        try:
            os.setsid()
            os.closerange(3, read_end)  # every descriptor of the command's but our pipe's
            os.closerange(read_end + 1, os.sysconf("SC_OPEN_MAX"))
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
            _reap(tag, command, since)
        finally:
            os._exit(0)
    os.close(read_end)
    os.set_inheritable(write_end, False)
    return tag
