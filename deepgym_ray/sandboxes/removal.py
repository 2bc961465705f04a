"""Removing a directory tree that untrusted code shaped, whatever its shape.

``shutil.rmtree`` recurses once per level (a tree a few thousand levels deep raises
``RecursionError``), and cannot descend into a directory its owner made ``chmod 000`` when we
are not root. :func:`remove_tree` walks with an explicit stack and file descriptors: it never
follows a symbolic link (a link is unlinked, whatever it points at), never builds a path longer
than one name, holds one directory open at a time (climbing back with ``..``, which is safe
because nothing of the run is still running when it is called: the provider kills every
process first), makes a directory it cannot read readable before reading it, and never walks
into another file system mounted inside the tree (it fails instead: unmount first).

Stdlib only: the Docker provider ships it into its containers, where the agent cleans up
with it (as ``deepgym_agent_removal``).

Example:
    remove_tree("/tmp/deepgym-run-1-abc")
    # True
"""

from __future__ import annotations

import errno
import logging
import os
import stat

logger = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # chmod 000 by its (our) owner: we may change it back
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _entries(fd: int) -> list[str]:
    """Unlink every non-directory entry of the directory ``fd``; the names of its
    subdirectories (still to be emptied)."""
    with os.scandir(fd) as entries:
        names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    subdirectories = []
    for name, is_dir in names:
        if is_dir:
            subdirectories.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:  # replaced since we listed it
            subdirectories.append(name)
    return subdirectories


def _empty(fd: int) -> None:
    """Empty the directory ``fd`` (which this function closes), depth first, iteratively.

    Each directory is listed once on the way down and once more when it looks empty, and every
    call works on one name from an open descriptor: the time is linear in the tree's size
    whatever its shape (paths rebuilt from the top cost the square of the depth: 0.38 s
    against 0.034 s for a 1,500-level tree, on a quiet 2-core machine).
    """
    # (name in parent, parent's device, parent's inode, parent's subdirectories still to go)
    stack: list[tuple[str, int, int, list[str]]] = []
    todo = _entries(fd)
    try:
        while True:
            if todo:
                child = todo.pop()
                try:
                    sub = _open_dir(child, fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # not a directory after all
                        os.unlink(child, dir_fd=fd)
                        continue
                    raise
                here = os.fstat(fd)
                if os.fstat(sub).st_dev != here.st_dev:  # a mount point: never walk into it
                    os.close(sub)
                    raise OSError(errno.EBUSY, f"a file system is mounted on {child!r}")
                stack.append((child, here.st_dev, here.st_ino, todo))
                os.close(fd)
                fd = sub
                todo = _entries(fd)
                continue
            todo = _entries(fd)  # nothing of the run is running: this only makes sure
            if todo:
                continue
            if not stack:
                return
            name, dev, ino, todo = stack.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            there = os.fstat(fd)
            if (there.st_dev, there.st_ino) != (dev, ino):
                raise OSError(errno.ESTALE, "the tree moved while it was being removed")
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def remove_tree(path: str | os.PathLike[str], *, quiet: bool = False) -> bool:
    """Remove ``path`` and everything under it without following links; True when it is gone
    (a missing path counts as gone). Errors are logged (at debug level when ``quiet``: the
    caller tries again), never raised."""
    log = logger.debug if quiet else logger.error
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError as exc:
        log("cannot remove %s: %s", path, exc)
        return False
    try:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path)
            return True
        _empty(_open_dir(path, None))
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return not os.path.lexists(path)
    except OSError as exc:
        log("cannot remove %s: %s", path, exc)
        return False
