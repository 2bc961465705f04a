"""What of an agent's work directory may reach the grading container, and what reading it costs.

The agent's container is thrown away after its phase; only its work directory travels, as the
tar archive the engine makes of it, to a fresh container where the tests run as root. That
archive is the agent's work, hostile in two ways:

- **Its cost.** :func:`read_tree` reads the archive as the engine streams it and stops at the
  first entry past a bound of :class:`TreeLimits` (entries, depth, path length, header bytes,
  symlink target bytes, file bytes): :class:`TreeTooLarge` names the bound, and nothing past it
  is read or copied on. The bounds are counted here, on the host, on the very bytes that would
  travel: a check run inside the agent's container would run programs the agent (root there)
  may have replaced.
- **Where it leads.** :func:`confine` keeps directories, regular files, hard links to files it
  kept, and symlinks that the kernel resolves inside the work directory; everything else (a link
  out, devices, fifos, names outside the directory or below something that is not a kept
  directory) is dropped and named. Set-uid, set-gid and sticky bits and extended attributes
  (file capabilities) are cleared.

Why links are resolved over the archive's own tree, not by their text: the kernel resolves a
target one component at a time from where it stands, following each link it meets, so ``..``
after a link climbs from where that link led. With ``d1 -> .``, the target
``d1/../tests/expected.txt`` normalises (``posixpath.normpath``) to a name inside the work
directory, yet the kernel goes ``/app/d1`` -> ``/app``, ``..`` -> ``/``, and lands on
``/tests/expected.txt``. The grading container's work directory is emptied before the archive
is unpacked, so the kept entries are the whole tree the kernel will walk there: :func:`confine`
walks it as the kernel does (each link through its own target, resolved the same way, at most
``MAX_HOPS`` deep, a loop refused) and keeps a link only when every step stays inside. An
absolute target is walked from the work directory when it names a path in it
(``/app/out -> /app/build/out``), else refused. So no spelling of a kept entry reaches
``/tests``, ``/logs`` or anything else outside the work directory when the tests open it.

Example:
    tree = read_tree(stream)            # a file object over the engine's archive of /app
    kept = confine(tree, "/app")        # kept.data: the archive to unpack; kept.dropped: why not
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["Confined", "TreeLimits", "TreeTooLarge", "confine", "read_tree"]

MAX_HOPS = 40  # links followed within one link's resolution (the kernel's own limit)

Entry = tuple[tarfile.TarInfo, bytes | None]
Path = tuple[str, ...]  # components below the work directory; () is the directory itself


@dataclass(frozen=True)
class TreeLimits:
    """What a work directory may hold to be copied to grading (an archive past any of these is
    the answer's judged 0). Legitimate work directories sit far below each: the worst tree
    within all of them unpacks in the engine in well under the transfer's time allowance."""

    entries: int = 50_000
    depth: int = 64  # components below the work directory
    name_bytes: int = 1024  # of one entry's path in the archive
    header_bytes: int = 32 << 20  # tar headers, long-name records included
    link_bytes: int = 1 << 20  # the targets of all symlinks and hard links together
    data_bytes: int = 256 << 20  # file contents


class TreeTooLarge(Exception):
    """The work directory overran a bound of :class:`TreeLimits` (the message names it)."""


@dataclass
class Confined:
    """What :func:`confine` kept: the archive to unpack, why the rest was dropped, and the
    size of what was kept (for the time its copy is allowed)."""

    data: bytes
    dropped: list[str] = field(default_factory=list)
    entries: int = 0
    components: int = 0  # path components of all kept entries together
    data_bytes: int = 0


def read_tree(stream: BinaryIO, limits: TreeLimits = TreeLimits()) -> list[Entry]:
    """The entries of the tar archive read from ``stream`` (each with its file's bytes), in
    archive order; TreeTooLarge at the first entry past a bound of ``limits``. tarfile.TarError
    when the stream is no archive."""
    entries: list[Entry] = []
    headers = links = data = 0
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if len(entries) >= limits.entries:
                raise TreeTooLarge(f"more than {limits.entries} entries")
            name = member.name.encode("utf-8", "surrogateescape")
            if len(name) > limits.name_bytes:
                raise TreeTooLarge(f"a path longer than {limits.name_bytes} bytes "
                                   f"({name[:60].decode('utf-8', 'replace')}...)")
            depth = len([p for p in member.name.split("/") if p not in ("", ".")]) - 1
            if depth > limits.depth:
                raise TreeTooLarge(f"a path more than {limits.depth} directories deep "
                                   f"({name[:60].decode('utf-8', 'replace')}...)")
            headers += member.offset_data - member.offset
            if headers > limits.header_bytes:
                raise TreeTooLarge(f"more than {limits.header_bytes >> 20} MiB of tar headers")
            if member.issym() or member.islnk():
                links += len(member.linkname.encode("utf-8", "surrogateescape"))
                if links > limits.link_bytes:
                    raise TreeTooLarge(f"link targets of more than {limits.link_bytes >> 10} "
                                       "KiB together")
            body = None
            if member.isfile():
                data += member.size
                if data > limits.data_bytes:
                    raise TreeTooLarge(f"more than {limits.data_bytes >> 20} MiB of files")
                body = archive.extractfile(member).read()
            entries.append((member, body))
    return entries


def confine(entries: list[Entry], workdir: str) -> Confined:
    """The archive of what of ``entries`` (an archive of ``workdir``, its entries named
    ``<last component of workdir>/...``) stays inside ``workdir`` however the kernel resolves
    it (see the module docstring), and what was dropped, with why. The entries kept are
    renamed and cleared in place."""
    top = posixpath.basename(workdir.rstrip("/"))
    tree: dict[Path, tarfile.TarInfo] = {}
    kept: list[Entry] = []
    dropped: list[str] = []
    for member, body in entries:
        why, path = _admit(member, top, tree)
        if why:
            dropped.append(f"{member.name} ({why})")
            continue
        member.name = "/".join((top, *path))
        member.mode &= 0o777
        member.pax_headers = {}  # no extended attributes (file capabilities) travel
        if member.islnk():
            member.linkname = "/".join((top, *_place(member.linkname, top)))
        tree[path] = member
        kept.append((member, body))
    links = _Links(tree, workdir.rstrip("/") or "/")
    out = io.BytesIO()
    result = Confined(b"", dropped)
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member, body in kept:
            if member.issym() and links.resolve(_place(member.name, top)) is None:
                dropped.append(f"{member.name} (a symlink to {member.linkname}: the kernel "
                               "would resolve it out of the work directory)")
                continue
            archive.addfile(member, io.BytesIO(body) if body is not None else None)
            result.entries += 1
            result.components += member.name.count("/") + 1
            result.data_bytes += len(body or b"")
    result.data = out.getvalue()
    return result


def _place(name: str, top: str) -> Path | None:
    """``name``'s components below ``top``; None when it is absolute, holds ``..`` or is not
    under ``top``."""
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or parts[0] != top or ".." in parts:
        return None
    return tuple(parts[1:])


def _admit(member: tarfile.TarInfo, top: str,
           tree: dict[Path, tarfile.TarInfo]) -> tuple[str | None, Path]:
    """Why ``member`` cannot be unpacked as it is named (None: it can), and its path. Its
    directory must be one already kept (nothing is unpacked through a link or a file)."""
    path = _place(member.name, top)
    if path is None:
        return "outside the work directory", ()
    if path in tree:
        return "a second entry of the same name", path
    if not path and not member.isdir():
        return "the work directory itself is not a directory", path
    if path and not (path[:-1] in tree and tree[path[:-1]].isdir()):
        return "not in a directory kept", path
    if member.islnk():
        target = _place(member.linkname, top)
        if target is None or target not in tree or not (tree[target].isfile()
                                                        or tree[target].islnk()):
            return f"a hard link to {member.linkname}, not a file kept before it", path
    elif not (member.isfile() or member.isdir() or member.issym()):
        return "not a file, directory or link", path
    return None, path


class _Links:
    """Resolves the symlinks of one tree as the kernel would, each once (memoised)."""

    def __init__(self, tree: dict[Path, tarfile.TarInfo], workdir: str) -> None:
        self.tree, self.workdir = tree, workdir
        self.resolved: dict[Path, Path | None] = {}
        self.active: set[Path] = set()

    def resolve(self, link: Path, hops: int = 0) -> Path | None:
        """Where the symlink at ``link`` leads (a path inside the tree, which may not exist),
        or None when it leads out, loops, or passes through something that is not a
        directory or a link kept."""
        if link in self.resolved:
            return self.resolved[link]
        if link in self.active or hops >= MAX_HOPS:
            return None  # a loop, or a chain longer than the kernel follows
        self.active.add(link)
        target = self.tree[link].linkname
        if target == self.workdir or target.startswith(self.workdir.rstrip("/") + "/"):
            where = self._walk((), target[len(self.workdir):], hops)
        elif target.startswith("/"):
            where = None
        else:
            where = self._walk(link[:-1], target, hops)
        self.active.discard(link)
        self.resolved[link] = where
        return where

    def _walk(self, here: Path, target: str, hops: int) -> Path | None:
        parts = [p for p in target.split("/") if p not in ("", ".")]
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part == "..":
                if not here:
                    return None  # above the work directory
                here = here[:-1]
                continue
            step = here + (part,)
            entry = self.tree.get(step)
            if entry is not None and entry.issym():
                step = self.resolve(step, hops + 1)
                if step is None:
                    return None
                entry = self.tree.get(step)
            if last:
                return step
            if entry is None or not entry.isdir():
                return None  # the kernel stops here (no such directory): refused as well
            here = step
        return here
