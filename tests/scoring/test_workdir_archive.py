"""What of an agent's work directory reaches the grading container (scoring.workdir_archive)."""

from __future__ import annotations

import io
import tarfile

from deepgym_ray.scoring.workdir_archive import confine


def archive(*members: tuple[str, str, str]) -> bytes:
    """A tar of (name, kind, content-or-link-target) entries."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size, info.mode = len(value), 0o4755
                tar.addfile(info, io.BytesIO(value.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "dev": tarfile.CHRTYPE}[kind]
            info.linkname = value
            tar.addfile(info)
    return buffer.getvalue()


def test_only_what_stays_inside_the_work_directory_is_kept():
    data = archive(("app", "dir", ""), ("app/answer.txt", "file", "42\n"),
                   ("app/sub", "dir", ""), ("app/sub/ok", "sym", "../answer.txt"),
                   ("app/hard", "hard", "app/answer.txt"),
                   ("app/out", "sym", "/logs/verifier/reward.txt"),
                   ("app/up", "sym", "../../etc/passwd"), ("app/sub/up", "sym", "../.."),
                   ("app/outhard", "hard", "etc/shadow"), ("app/pipe", "fifo", ""),
                   ("app/tty", "dev", ""), ("elsewhere/x", "file", "no"),
                   ("app/../x", "file", "no"))
    kept, dropped = confine(data, "app")
    with tarfile.open(fileobj=io.BytesIO(kept)) as tar:
        members = {m.name: m for m in tar}
        assert set(members) == {"app", "app/answer.txt", "app/sub", "app/sub/ok", "app/hard"}
        assert members["app/answer.txt"].mode == 0o755  # no set-uid bit travels
        assert tar.extractfile("app/answer.txt").read() == b"42\n"
    assert len(dropped) == 8 and any("reward.txt" in d for d in dropped)
