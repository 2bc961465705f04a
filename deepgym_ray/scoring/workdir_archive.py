"""What of an agent's work directory may reach the grading container.

The agent's container is thrown away after its phase; only its work directory travels, as a
tar archive, to a fresh container where the tests run as root. The archive is the agent's
work, so it is hostile: :func:`confine` keeps regular files and directories inside the work
directory, and symlinks and hard links only where they point inside it too. Everything else
(a link out of the directory, devices, fifos, absolute or ``..`` names) is dropped and named;
set-uid, set-gid and sticky bits are cleared.

Example:
    safe, dropped = confine(tar_bytes, "app")
"""

from __future__ import annotations

import io
import posixpath
import tarfile

__all__ = ["confine"]


def _inside(name: str, top: str) -> bool:
    normal = posixpath.normpath(name)
    return normal == top or normal.startswith(top + "/")


def confine(data: bytes, top: str) -> tuple[bytes, list[str]]:
    """The archive ``data`` (whose entries sit under ``top``) with only what stays inside
    ``top``; and the names of what was dropped, with why."""
    kept, dropped = io.BytesIO(), []
    with tarfile.open(fileobj=io.BytesIO(data)) as source, \
            tarfile.open(fileobj=kept, mode="w") as target:
        for member in source:
            name = member.name
            if name.startswith("/") or ".." in name.split("/") or not _inside(name, top):
                dropped.append(f"{name} (outside the work directory)")
                continue
            if member.issym():
                where = posixpath.join(posixpath.dirname(name), member.linkname)
                if member.linkname.startswith("/") or not _inside(where, top):
                    dropped.append(f"{name} (a symlink to {member.linkname})")
                    continue
            elif member.islnk():
                if not _inside(member.linkname, top):
                    dropped.append(f"{name} (a hard link to {member.linkname})")
                    continue
            elif not (member.isfile() or member.isdir()):
                dropped.append(f"{name} (not a file or directory)")
                continue
            member.mode &= 0o777
            body = source.extractfile(member) if member.isfile() else None
            target.addfile(member, body)
    return kept.getvalue(), dropped
