"""Reading an environment's text files: UTF-8, a leading byte order mark dropped, and an error
that names the file and the bad byte when the file is not UTF-8.

Editors on some systems save UTF-8 with a byte order mark; Python's ``compile`` and ``json``
reject it in a string, so it is dropped here, once, for every file an environment is made of.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "task.md"
    >>> _ = path.write_bytes(b"\\xef\\xbb\\xbfhello")
    >>> read_text(path)
    'hello'
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BOM", "decode_text", "read_text"]

BOM = "\ufeff"


def decode_text(data: bytes, path: str | Path) -> str:
    """``data`` (the contents of ``path``) as text; ValueError naming ``path`` and where the
    first byte that is not UTF-8 sits (offset, line and column)."""
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start} (line {line}, column {column}) cannot be decoded "
                         f"({exc.reason}); save the file as UTF-8") from None


def read_text(path: str | Path) -> str:
    """The text of the file at ``path`` (see :func:`decode_text`); OSError when unreadable."""
    return decode_text(Path(path).read_bytes(), path)
