"""The solution's size-limited work area, and removing what runs leave on the host.

As root, each run's solution directory is its own tmpfs (``size=`` and ``nr_inodes=``), so a
run's files, all together, can take no more space or inodes than its limits, and nothing it
writes reaches the host's disk; unmounting it (lazily, after every process of the run is gone)
frees it all at once, whatever tree is inside. The zygote sees each run's tmpfs because the
parent of all runs' directories is a shared mount (:func:`make_shared`), of which the zygote's
bind mount is a slave. Without root the directory stays on the host's disk, limited per file.

:func:`sweep_stale_dirs` removes the directories (and unmounts the mounts) of providers that
died mid-run, once per process, with :func:`~deepgym_ray.sandboxes.local.removal.remove_tree`, which
no tree shape can break.

Example:
    mount_tmpfs("/tmp/deepgym-sol-1-zab/run-x/work", size_mb=256, inodes=20000, uid=1 << 20)
    unmount_under("/tmp/deepgym-sol-1-zab/run-x")
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import tempfile
from pathlib import Path

from deepgym_ray.sandboxes.local.removal import remove_tree

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_SHARED = 2, 4, 4096, 16384, 1 << 20
MNT_DETACH = 2
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount_tmpfs(path: str | os.PathLike[str], *, size_mb: int, inodes: int, uid: int) -> None:
    """Mount a fresh tmpfs owned by ``uid`` (mode 0700) on ``path`` (raises OSError)."""
    options = f"size={int(size_mb)}m,nr_inodes={int(inodes)},mode=0700,uid={uid},gid={uid}"
    _check(_libc().mount(b"deepgym", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV,
                         options.encode()), f"mount tmpfs on {path}")


def make_shared(path: str | os.PathLike[str]) -> None:
    """Make ``path`` a mount point whose later sub-mounts propagate to its bind mounts."""
    target = os.fsencode(path)
    _check(_libc().mount(target, target, None, MS_BIND, None), f"bind {path}")
    _check(_libc().mount(None, target, None, MS_SHARED | MS_REC, None), f"share {path}")


def mounts_under(path: str | os.PathLike[str]) -> list[str]:
    """Mount points at or under ``path`` (deepest first), from /proc/self/mountinfo."""
    root = os.path.realpath(path).rstrip("/")
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")  # \040 for a space, etc.
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def unmount_under(path: str | os.PathLike[str]) -> bool:
    """Detach every mount at or under ``path``; True when none is left."""
    for _ in range(3):
        points = mounts_under(path)
        if not points:
            return True
        for point in points:
            _libc().umount2(os.fsencode(point), MNT_DETACH)
    return not mounts_under(path)


def discard(path: str | os.PathLike[str]) -> bool:
    """Unmount what is mounted under ``path`` and remove it; True when it is gone."""
    unmounted = unmount_under(path) if os.geteuid() == 0 else True
    return remove_tree(path) and unmounted


def discard_if_empty(path: str | os.PathLike[str]) -> None:
    """:func:`discard` ``path`` when nothing is left in it (no run's directory)."""
    try:
        if any(Path(path).iterdir()):
            return
    except OSError:
        return  # already gone
    discard(path)


_SWEPT = False


def sweep_stale_dirs() -> None:
    """Remove sandbox directories left by processes that died mid-run (a killed Ray actor has
    no chance to tear down); their names carry the creating process's pid."""
    global _SWEPT
    if _SWEPT:
        return
    _SWEPT = True
    root = Path(tempfile.gettempdir())
    for path in root.glob("deepgym-[rs][uo][nl]-*-*"):
        pid = path.name.split("-")[2]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        discard(path)
