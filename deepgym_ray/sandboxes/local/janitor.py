"""What goes when this process goes: mounts, run cgroups and run uids handed to a janitor.

A mount outlives the process that made it, and so do the solution processes of a run in
flight (their own sessions and uids, in the zygote's PID namespace); a killed Ray worker, or a
driver ended by SIGKILL, runs no clean-up of its own, and the next provider's sweeps only find
what was left in *its* temp directory and cgroups, whenever it starts. So each process that
mounts or makes run cgroups starts one janitor (``deepgym_janitor.py``, standard library only),
which leaves this process's tree and reads orders from a pipe only this process holds. When
the pipe ends, however this process ended, the janitor kills every process in this process's
run cgroups (:func:`kill_groups_at_exit`) and of the run uids it was given
(:func:`kill_uid_at_exit`), removes the groups, then detaches every mount at or under the paths
(:func:`release_at_exit`) and removes them. Orders cost one pipe write each; what this process
cleaned up itself by then costs nothing.

Example:
    release_at_exit("/tmp/deepgym-run-12-wab1")  # a tmpfs mounted there just now
    kill_groups_at_exit("deepgym-12-", ["/sys/fs/cgroup/freezer"])
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["forget_uid", "kill_groups_at_exit", "kill_uid_at_exit", "release_at_exit"]

logger = logging.getLogger(__name__)

SCRIPT = str(Path(__file__).resolve().parent / "deepgym_janitor.py")
_lock = threading.Lock()
_pipe: tuple[int, int] | None = None  # (the process that started the janitor, our end)


def _start() -> int | None:
    read_end, write_end = os.pipe()  # both close on exec: no runner ever holds our end
    try:
        # This process's pid in the command line: whose janitor it is, for ps and tests.
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", SCRIPT, str(read_end), str(os.getpid())],
            pass_fds=(read_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd="/",
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
        proc.wait(10)  # the first fork: the janitor itself has moved away by then
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("no janitor for this process's mounts and runs (%s): a killed process "
                       "leaves them until the next local provider", exc)
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return write_end


def _send(line: bytes) -> bool:
    """Give the janitor of this process one order; False when there is none."""
    global _pipe
    with _lock:
        if _pipe is None or _pipe[0] != os.getpid():  # a forked child needs its own
            fd = _start()
            if fd is None:
                return False
            _pipe = (os.getpid(), fd)
        try:
            os.write(_pipe[1], line + b"\n")  # one write under PIPE_BUF: never interleaved
            return True
        except OSError as exc:
            logger.warning("the janitor is gone (%s): what it was to clean up stays if this "
                           "process is killed", exc)
            return False


def release_at_exit(path: str | os.PathLike[str]) -> None:
    """Detach the mounts at or under ``path`` and remove it once this process is gone."""
    _send(os.fsencode(os.fspath(path)))


def kill_groups_at_exit(prefix: str, parents: Iterable[str | os.PathLike[str]]) -> None:
    """Once this process is gone, kill every process in the cgroups named ``prefix*`` under
    ``parents`` (one per controller), then remove those groups."""
    fields = [b"cgroups", prefix.encode(), *(os.fsencode(os.fspath(p)) for p in parents)]
    _send(b"\t".join(fields))


def kill_uid_at_exit(uid: int) -> None:
    """Once this process is gone, kill every process of ``uid`` (a run without cgroups)."""
    _send(b"uid\t%d" % uid)


def forget_uid(uid: int) -> None:
    """``uid``'s run is over: take it back from :func:`kill_uid_at_exit`."""
    _send(b"-uid\t%d" % uid)
