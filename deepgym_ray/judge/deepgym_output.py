"""Reading a file the solution wrote, as the verifier, without following anything it planted
(stdlib only).

The solution's processes run beside the verifier and can change their folder at any moment, so
a path checked and then opened could lead elsewhere by the time it is opened (a component
swapped for a symlink to the verifier's files). :func:`read_output_bytes` therefore never
resolves a path: it opens ``root`` (not a symlink itself), then each component from the folder
before it with ``O_NOFOLLOW`` (a symlink anywhere fails the open itself, whenever it was made),
and reads the file it opened: a regular file with one link, at most ``limit`` bytes, or an
:class:`OutputRefused` error, never a prefix of it.

The solution's processes run in a folder of their own (``load_solution``, ``run_solution``):
``root=None``, or the folder of the solution's file as the verifier sees it
(``os.path.dirname(solution_path)``, as verifiers written for DeepGym pass it), or a session's
work directory as its verifier sees it (``work_dir``), stands for it.

Example (inside a verifier):
    from deepgym_solution import read_output
    text = read_output("out/answer.txt", root=os.path.dirname(solution_path))
"""

import errno
import os
import stat

from deepgym_spawn import STATE, mark_in_play, solution_dir

__all__ = ["MAX_OUTPUT_FILE", "OutputRefused", "read_output", "read_output_bytes"]

MAX_OUTPUT_FILE = 16 << 20  # read_output's default limit, in bytes
_NOT_FOLLOWED = (errno.ELOOP, errno.ENOTDIR)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted at the path must not hang the open (it is refused below).
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class OutputRefused(OSError):
    """The solution's output cannot be read as asked: outside ``root``, through a symlink, not
    a regular file, or larger than the limit. An ``OSError``, as a missing file is."""


def _parts(path):
    path = os.fspath(path)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not path or os.path.isabs(path) or "\0" in path:
        raise OutputRefused(f"{path!r} is not a path relative to the root")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise OutputRefused(f"{path!r} leads outside the root")
    return parts


def _root(root):
    """The folder to read in: the solution's own folder (where its processes run and write)
    for None or for the folder of the solution's file as the verifier sees it, else ``root``."""
    if root is None:
        return solution_dir()
    given = os.path.abspath(os.fspath(root))
    own = STATE.get("solution_path")
    # A session's solution is the copy of the agent's work directory: what the agent's code
    # writes while the verifier runs goes to the directory its processes run in.
    if own is not None and given in (os.path.dirname(os.path.abspath(own)),
                                     os.path.abspath(own)):
        return solution_dir()
    return given


def _open_in(folder, name, flags, path):
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        if exc.errno in _NOT_FOLLOWED:  # a symlink (or a file where a folder should be)
            raise OutputRefused(
                f"{path!r}: {name!r} is a symlink or not what the path needs") from None
        raise


def read_output_bytes(path, root, limit):
    """The bytes of the file at ``path`` inside ``root`` (see the module docstring)."""
    mark_in_play()  # the policy's output is being read: failures from here are its own
    limit = int(limit)
    parts = _parts(path)
    try:
        folder = os.open(_root(root), _DIR)
    except OSError as exc:
        if exc.errno in _NOT_FOLLOWED:
            raise OutputRefused(f"the root {root!r} is a symlink or not a folder") from None
        raise
    try:
        for name in parts[:-1]:
            inner = _open_in(folder, name, _DIR, path)
            os.close(folder)
            folder = inner
        fd = _open_in(folder, parts[-1], _FILE, path)
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputRefused(f"{path!r} is not a regular file")
        if info.st_nlink != 1:  # a hard link to a file of someone else's
            raise OutputRefused(f"{path!r} has {info.st_nlink} links (a hard link)")
        if info.st_size > limit:
            raise OutputRefused(f"{path!r} is {info.st_size} bytes, over the limit of {limit}")
        chunks, size = [], 0
        while size <= limit:  # it may still grow: read one byte past the limit to see it
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OutputRefused(f"{path!r} grew over the limit of {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_output(path, root, limit=MAX_OUTPUT_FILE):
    """The text (UTF-8, undecodable bytes replaced) of the file at ``path`` inside ``root``."""
    return read_output_bytes(path, root, limit).decode("utf-8", "replace")
