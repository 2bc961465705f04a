"""Mounts that go when this process goes: :func:`release_at_exit` hands a path to a janitor.

A mount outlives the process that made it, and a killed Ray worker runs no clean-up of its
own; the next provider's :func:`~deepgym_ray.sandboxes.local.workarea.sweep_stale_dirs` only
finds what was left in *its* temp directory. So each process that mounts starts one janitor
(``deepgym_janitor.py``, standard library only), which leaves this process's tree and reads
paths from a pipe only this process holds. When the pipe ends, however this process ended, the
janitor detaches every mount at or under those paths and removes them. Paths this process has
removed itself by then cost nothing.

Example:
    release_at_exit("/tmp/deepgym-run-12-wab1")  # a tmpfs mounted there just now
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["release_at_exit"]

logger = logging.getLogger(__name__)

SCRIPT = str(Path(__file__).resolve().parent / "deepgym_janitor.py")
_lock = threading.Lock()
_pipe: tuple[int, int] | None = None  # (the process that started the janitor, our end)


def _start() -> int | None:
    read_end, write_end = os.pipe()  # both close on exec: no runner ever holds our end
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", SCRIPT, str(read_end)], pass_fds=(read_end,),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
        proc.wait(10)  # the first fork: the janitor itself has moved away by then
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("no janitor for this process's mounts (%s): a killed process leaves "
                       "them until the next local provider in its temp directory", exc)
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return write_end


def release_at_exit(path: str | os.PathLike[str]) -> None:
    """Detach the mounts at or under ``path`` and remove it once this process is gone."""
    global _pipe
    with _lock:
        if _pipe is None or _pipe[0] != os.getpid():  # a forked child needs its own
            fd = _start()
            if fd is None:
                return
            _pipe = (os.getpid(), fd)
        try:
            os.write(_pipe[1], os.fsencode(os.fspath(path)) + b"\n")
        except OSError as exc:
            logger.warning("the janitor is gone (%s): %s stays if this process is killed",
                           exc, path)
