"""Detach and remove the mounts of a process once it is gone, however it went.

The local provider mounts tmpfs file systems as root (the runners' work root, the solutions'
shared root with each run's tmpfs under it). A mount outlives the process that made it, and a
Ray worker is often ended by SIGKILL, when no clean-up of its own can run. So the provider
starts this script once (see ``janitor.py`` beside it) as
``python -I -S -B deepgym_janitor.py FD``: it leaves its parent's process tree at once (a
worker's exit kills the worker's children, never a grandchild that moved away), then reads
the paths the provider writes on the pipe FD, one per line. When the pipe ends (the
provider's process exited or was killed) it detaches every mount at or under those paths,
deepest first, and removes them. Standard library only: it starts in milliseconds.
"""

import ctypes
import os
import shutil
import sys

MNT_DETACH = 2


def mounts_under(*paths):
    """Mount points at or under any of ``paths`` (deepest first), from one read of
    /proc/self/mountinfo (the host's code imports this too)."""
    roots = [os.path.realpath(path).rstrip("/") for path in paths]
    found = []
    try:
        with open("/proc/self/mountinfo") as table:
            lines = table.read().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")  # \040 for a space, etc.
            if any(point == root or point.startswith(root + "/") for root in roots):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def release(paths):
    """Detach what is mounted at or under ``paths`` (three rounds at most), then remove them."""
    libc = ctypes.CDLL(None, use_errno=True)  # find_library("c") would run ldconfig
    for _ in range(3):
        points = mounts_under(*paths)
        if not points:
            break
        for point in points:
            libc.umount2(os.fsencode(point), MNT_DETACH)
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)  # fd-based: no symlink leads it elsewhere


def main(fd):
    if os.fork():
        os._exit(0)  # the provider waits for this exit: no zombie, and we are no child of it
    os.setsid()  # nor in its session or process group
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    paths = [line for line in data.decode("utf-8", "surrogateescape").splitlines() if line]
    if paths:
        release(paths)


if __name__ == "__main__":
    main(int(sys.argv[1]))
