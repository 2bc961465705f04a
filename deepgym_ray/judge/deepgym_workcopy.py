"""The copy of an agent's work directory that its session verifier reads (stdlib only).

An agent owned its work directory for many steps, so every name in it means what the agent
wanted, and a link can mean something else to the process that follows it than to the one
that made it (``answer.txt -> /proc/self/cwd/expected.txt`` leads into whichever process opens
it; a link out leads wherever the reader has rights). A session verifier therefore never reads
the agent's directory: before any verifier code runs, the runner copies it into a directory of
its own (:data:`COPY_NAME`, inside the runner's work directory, which no solution process can
enter or change), and the verifier reads the copy, with it as its current directory. What the
copy holds, nothing can change while the verifier reads it.

The copy holds regular files and directories only, read through descriptors: each directory is
opened beneath the one before it with ``O_NOFOLLOW``, each file with ``O_NOFOLLOW | O_NONBLOCK``
and checked once open to be a regular file; nothing is ever reached by a path that a link
resolved. Of what else the agent left:

- a symlink becomes a copy of the file it names when that file is found inside the tree by its
  own names: a relative target without ``..``, no link on the way, a regular file at its end
  (``latest.json -> out/v2.json``); any other link (absolute, with ``..``, through ``/proc``, to
  a directory or another link, dangling) is left out;
- a FIFO, a socket or a device is left out, and so is an entry the runner cannot read;
- what is left out is named in the copy's :class:`Report` (and the result's details).

Every cost the agent controls is bounded by its own limits: entries and bytes by the capacity
of the file system its directory is on (its work area: the most the agent could have written),
depth by :data:`MAX_DEPTH`, a path's length by :data:`MAX_PATH`. A tree over a bound is refused
(:class:`CopyRefused`): after the agent acted, that is its judged 0. Nothing else of the
agent's can fail the copy (what it cannot read, or should not follow, is left out), so a copy
that fails otherwise failed on our side (the runner's disk, its rights): no verdict.

Example (what the runner does with a session's config):
    report = copy_tree("/tmp/run-1/work", "/tmp/deepgym-run-1/agent-work")
    report.left_out   # [('answer.txt', 'a link to /proc/self/cwd/expected.txt (absolute)')]
"""

import os
import stat

__all__ = ["COPY_NAME", "CopyRefused", "Report", "copy_tree", "take_copy"]

COPY_NAME = "agent-work"  # not an identifier: never importable from the runner's directory
MAX_DEPTH = 64
MAX_PATH = 4096
# Caps on the capacity read off the work area (a host's disk would give no bound at all).
MAX_BYTES = 4 << 30
MAX_ENTRIES = 1 << 20
NAMED = 20  # left-out entries named in the report
CAP_DAC_READ_SEARCH = 2

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class CopyRefused(Exception):
    """The agent's tree is over one of its bounds, or could not be copied."""


class Report:
    """What a copy held and what it left out."""

    def __init__(self, max_bytes, max_entries):
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.files = self.directories = self.bytes = self.entries = 0
        self.left_out = []  # (path, why), the first NAMED of them
        self.left_out_count = 0

    def count(self, path):
        self.entries += 1
        if self.entries > self.max_entries:
            raise CopyRefused(f"the work directory holds more than {self.max_entries} entries "
                              "(its work area's capacity)")
        if len(os.fsencode(path)) > MAX_PATH:
            raise CopyRefused(f"a path in the work directory is longer than {MAX_PATH} bytes: "
                              f"{path[:120]}...")

    def take_bytes(self, size, path):
        self.bytes += size
        if self.bytes > self.max_bytes:
            raise CopyRefused(f"the work directory holds more than {self.max_bytes} bytes (its "
                              f"work area's capacity; the last file counted: {path[:200]})")

    def leave_out(self, path, why):
        self.left_out_count += 1
        if len(self.left_out) < NAMED:
            self.left_out.append((path, why))

    def note(self):
        """One line naming what was left out, or None."""
        if not self.left_out_count:
            return None
        named = "; ".join(f"{path} ({why})" for path, why in self.left_out)
        more = self.left_out_count - len(self.left_out)
        return ("left out of the work directory the verifier read: " + named
                + (f"; and {more} more" if more else ""))


def copy_tree(source, target):
    """Copy the directory ``source`` into the new directory ``target`` (see the module
    docstring); its :class:`Report`. Raises CopyRefused over a bound, OSError when it fails."""
    try:
        src = os.open(source, _DIR)  # the directory itself must not be a link
    except OSError as exc:
        raise CopyRefused(f"the work directory cannot be opened: {exc}") from None
    try:
        report = Report(*_capacity(src))
        os.mkdir(target, 0o700)
        dst = os.open(target, _DIR)
        try:
            _copy_dir(src, dst, "", 1, report)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return report


def _capacity(fd):
    """(bytes, entries): what the file system of ``fd`` can hold, capped."""
    found = os.fstatvfs(fd)
    return (min(found.f_blocks * found.f_frsize or MAX_BYTES, MAX_BYTES),
            min(found.f_files or MAX_ENTRIES, MAX_ENTRIES))


def _copy_dir(src, dst, prefix, depth, report):
    if depth > MAX_DEPTH:
        raise CopyRefused(f"the work directory is more than {MAX_DEPTH} directories deep "
                          f"(at {prefix[:200]})")
    kinds = []
    with os.scandir(src) as entries:  # on a descriptor: names only, nothing resolved
        for entry in entries:
            report.count(prefix + entry.name)
            kinds.append((entry.name, _kind(entry)))
    for name, kind in kinds:  # (what each entry is, opened or read, is checked again)
        path = prefix + name
        if kind == "dir":
            _copy_subdir(src, dst, name, path, depth, report)
        elif kind == "file":
            _copy_file(src, name, dst, name, path, report)
        elif kind == "link":
            _copy_link(src, name, dst, path, report)
        elif kind == "unreadable":  # a folder that can be listed but not searched
            report.leave_out(path, "an entry the judge cannot read")
        elif kind is not None:
            report.leave_out(path, "not a file, directory or link")


def _kind(entry):
    """What ``entry`` is, from the directory's own listing where the file system says (no
    call per entry), else by its ``lstat``: dir, file, link, other, unreadable, or None
    (gone)."""
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        return "file" if entry.is_file(follow_symlinks=False) else "other"
    except FileNotFoundError:
        return None
    except PermissionError:
        return "unreadable"


def _copy_subdir(src, dst, name, path, depth, report):
    try:
        inner = os.open(name, _DIR, dir_fd=src)
    except PermissionError:
        report.leave_out(path + "/", "a directory the judge cannot read")
        return
    try:
        found = os.fstat(inner)
        os.mkdir(name, 0o755, dir_fd=dst)
        _fill(os.open(name, _DIR, dir_fd=dst), found,
              lambda made: _copy_dir(inner, made, path + "/", depth + 1, report))
        report.directories += 1
    finally:
        os.close(inner)


def _copy_file(src, name, dst, new_name, path, report):
    """Copy the regular file ``name`` in ``src`` to ``new_name`` in ``dst``."""
    try:
        fd = os.open(name, _FILE, dir_fd=src)
    except PermissionError:
        report.leave_out(path, "a file the judge cannot read")
        return
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            report.leave_out(path, "not a regular file")
            return
        report.take_bytes(found.st_size, path)
        # The agent's execute bits are kept (a verifier may ask whether a script runs).
        mode = 0o755 if found.st_mode & 0o111 else 0o644
        _fill(os.open(new_name, _NEW, mode, dir_fd=dst), found,
              lambda out: _transfer(fd, out, found.st_size))
        report.files += 1
    finally:
        os.close(fd)


def _fill(made, found, fill):
    """``fill(made)``, a new entry of the copy's, then give it the times of the agent's entry
    ``found`` (a verifier may compare them), and close it."""
    try:
        fill(made)
        os.utime(made, ns=(found.st_atime_ns, found.st_mtime_ns))
    finally:
        os.close(made)


def _transfer(fd, out, size):
    offset = 0
    while offset < size:
        sent = os.sendfile(out, fd, offset, min(size - offset, 1 << 30))
        if sent == 0:  # the file is shorter than it was: what it holds is copied
            return
        offset += sent


def _copy_link(src, name, dst, path, report):
    """A link becomes a copy of the regular file it names inside the tree, else is left out."""
    target = os.readlink(name, dir_fd=src)
    parts = [part for part in target.split("/") if part not in ("", ".")]
    shown = f"a link to {target[:200]}"
    if target.startswith("/") or not parts or ".." in parts:
        why = "absolute" if target.startswith("/") else "leads up" if parts else "empty"
        report.leave_out(path, f"{shown} ({why})")
        return
    folder, opened = src, []
    try:
        for part in parts[:-1]:  # each folder on the way beneath the last, never a link
            try:
                folder = os.open(part, _DIR, dir_fd=folder)
            except OSError:
                report.leave_out(path, f"{shown} (not through directories of the tree)")
                return
            opened.append(folder)
        try:
            found = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except OSError:
            found = None
        if found is None or not stat.S_ISREG(found.st_mode):
            report.leave_out(path, f"{shown} (not a file of the tree)")
            return
        _copy_file(folder, parts[-1], dst, name, path, report)
    finally:
        for fd in opened:
            os.close(fd)


def take_copy(spec, workdir):
    """The runner's step before a session verifier: copy ``spec["from"]`` (the agent's work
    directory) to ``workdir``/:data:`COPY_NAME`; then give up the right to read what the runner
    could not read otherwise (a Docker runner keeps CAP_DAC_READ_SEARCH for the copy alone).

    Returns (the copy's path, its report's note or None, None), or (None, None, the final
    result dict) when there is no copy to judge: a tree over its bounds is the agent's judged 0
    once it has acted (``spec["acted"]``), before that the environment's error; a copy that
    failed otherwise failed on our side (nothing the agent controls is left unbounded or
    unhandled above): no verdict.
    """
    target = os.path.join(workdir, COPY_NAME)
    try:
        _remove(target)  # a step verifier's copy before: never this one's
        report = copy_tree(spec["from"], target)
    except (CopyRefused, OSError) as exc:
        _remove(target)
        acted = isinstance(exc, CopyRefused) and spec.get("acted", True)
        return None, None, _no_copy(exc, acted)
    finally:
        drop_read_rights()
    return target, report.note(), None


def _no_copy(exc, agents_zero):
    if agents_zero:
        return {"kind": "verdict", "exit_code": 1, "error_type": "policy_sandbox_failure",
                "score": 0.0, "passed": False, "in_play": True,
                "details": f"the agent's work directory was not judged: {exc}"}
    return {"kind": "verifier_failed", "exit_code": 2, "error_type": "verifier_error",
            "score": 0.0, "passed": False, "in_play": False,
            "details": f"the agent's work directory could not be copied for the verifier: "
                       f"{type(exc).__name__}: {exc}"}


def _remove(path):
    import shutil  # its tree removal works on descriptors, never following a link

    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)


def drop_read_rights():
    """Give up CAP_DAC_READ_SEARCH if this process holds it without being root (root keeps
    its rights: the local and remote runners are root, and the copy has no link to borrow
    them)."""
    if os.geteuid() == 0:
        return
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        return
    bit = 1 << CAP_DAC_READ_SEARCH
    if not (data[0].effective | data[0].permitted) & bit:
        return
    data[0].effective &= ~bit
    data[0].permitted &= ~bit
    data[0].inheritable &= ~bit
    if libc.capset(ctypes.byref(header), data) != 0:
        os._exit(124)  # never go on to the verifier with the right to read anything
