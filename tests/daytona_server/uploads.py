"""The toolbox's bulk upload (``POST /files/bulk-upload``), as Daytona's daemon answers it."""

from __future__ import annotations

import re

from daytona_toolbox_api_client import FsFileResult, UploadFilesResponse

from .box import Box, HttpError
from .replay import parse_multipart

_UPLOAD_FIELD = re.compile(r"files\[(\d+)\]\.(path|file)")


def bulk_upload(box: Box, content_type: str, body: bytes, replay: bool) -> tuple[int, dict]:
    """The toolbox's bulk upload: ``200 {"files": [...]}``, or ``400`` with an error per
    file that could not be written (``"errors"``, beside those that were)."""
    paths: dict[int, str] = {}
    contents: dict[int, bytes] = {}
    for name, content in parse_multipart(content_type, body):
        match = _UPLOAD_FIELD.fullmatch(name)
        if not match:
            raise HttpError(400, f"unexpected form field {name!r}")
        if match.group(2) == "path":
            paths[int(match.group(1))] = content.decode().strip()
        else:
            contents[int(match.group(1))] = content
    files = [(paths[i], contents.get(i, b"")) for i in sorted(paths)]
    if replay:  # (a replayed run's files are written, if at all, with its command)
        box.uploaded += files
        written, errors = [{"path": p, "bytes": len(c)} for p, c in files], []
    else:
        written, errors = box.write(files)
    reply = UploadFilesResponse(files=[FsFileResult.from_dict(w) for w in written],
                                errors=errors or None)
    return (400 if errors else 200), reply.to_dict()
