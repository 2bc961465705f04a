"""What of an agent's work directory reaches the grading container (scoring.workdir_archive):
links kept only where the kernel resolves them inside the work directory, and the bounds on
what reading the archive may cost."""

from __future__ import annotations

import io
import os
import random
import tarfile

import pytest

from deepgym_ray.scoring.workdir_archive import TreeLimits, TreeTooLarge, confine, read_tree


def archive(*members: tuple[str, str, str]) -> bytes:
    """A tar of (name, kind, content-or-link-target) entries."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size, info.mode = len(value), 0o4755
                tar.addfile(info, io.BytesIO(value.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "dev": tarfile.CHRTYPE}[kind]
            info.linkname, info.mode = value, 0o755
            tar.addfile(info)
    return buffer.getvalue()


def kept_names(data: bytes) -> dict[str, tarfile.TarInfo]:
    kept = confine(read_tree(io.BytesIO(data)), "/app")
    with tarfile.open(fileobj=io.BytesIO(kept.data)) as tar:
        return {member.name: member for member in tar}


def test_only_what_stays_inside_the_work_directory_is_kept():
    data = archive(("app", "dir", ""), ("app/answer.txt", "file", "42\n"),
                   ("app/sub", "dir", ""), ("app/sub/ok", "sym", "../answer.txt"),
                   ("app/hard", "hard", "app/answer.txt"),
                   ("app/out", "sym", "/logs/verifier/reward.txt"),
                   ("app/up", "sym", "../../etc/passwd"), ("app/sub/up", "sym", "../.."),
                   ("app/outhard", "hard", "etc/shadow"), ("app/pipe", "fifo", ""),
                   ("app/tty", "dev", ""), ("elsewhere/x", "file", "no"),
                   ("app/../x", "file", "no"))
    kept = confine(read_tree(io.BytesIO(data)), "/app")
    with tarfile.open(fileobj=io.BytesIO(kept.data)) as tar:
        members = {m.name: m for m in tar}
        assert set(members) == {"app", "app/answer.txt", "app/sub", "app/sub/ok", "app/hard"}
        assert members["app/answer.txt"].mode == 0o755  # no set-uid bit travels
        assert tar.extractfile("app/answer.txt").read() == b"42\n"
    assert len(kept.dropped) == 8 and any("reward.txt" in d for d in kept.dropped)
    assert (kept.entries, kept.data_bytes) == (5, 3)


# Each link is inside by its text (normpath), and out of the work directory as the kernel
# resolves it: through a link to the work directory or to a directory above where it is.
LINKS_OUT = [
    ("app/d1", "sym", "."),
    ("app/answer.txt", "sym", "d1/../tests/expected.txt"),  # the attack that scored 1.0
    ("app/sub", "dir", ""), ("app/sub/d", "sym", ".."),
    ("app/sub/x", "sym", "d/../logs/verifier/reward.txt"),
    ("app/via", "sym", "answer.txt"),  # a link to a link that leads out
    ("app/sub/deep", "dir", ""), ("app/sub/deep/up", "sym", "../d/d1/../../tests"),
    ("app/abs", "sym", "/app/d1/../tests/expected.txt"),  # absolute, through the same link
    ("app/loop1", "sym", "loop2"), ("app/loop2", "sym", "loop1"),
    ("app/d1/x", "file", "below a link: unpacking it would follow the link"),
    ("app/h", "hard", "app/d1/../tests/expected.txt"),
    ("app/h2", "hard", "app/sub/d/../tests/expected.txt"),
]


def test_links_are_resolved_as_the_kernel_resolves_them():
    kept = kept_names(archive(("app", "dir", ""), *LINKS_OUT))
    assert set(kept) == {"app", "app/d1", "app/sub", "app/sub/d", "app/sub/deep"}, kept


def test_legitimate_links_inside_the_tree_are_kept():
    data = archive(("app", "dir", ""), ("app/build", "dir", ""),
                   ("app/build/out.txt", "file", "7\n"),
                   ("app/answer.txt", "sym", "build/out.txt"),
                   ("app/build/again", "sym", "../answer.txt"),  # a link to a link
                   ("app/latest", "sym", "build"), ("app/through", "sym", "latest/out.txt"),
                   ("app/abs", "sym", "/app/build/out.txt"), ("app/self", "sym", "."),
                   ("app/round", "sym", "self/build/../build/out.txt"),
                   ("app/later", "sym", "build/not-written-yet"),
                   ("app/copy", "hard", "app/build/out.txt"))
    kept = kept_names(data)
    assert set(kept) == {"app", "app/build", "app/build/out.txt", "app/answer.txt",
                         "app/build/again", "app/latest", "app/through", "app/abs",
                         "app/self", "app/round", "app/later", "app/copy"}, kept


def test_hard_links_only_to_files_kept_before_them():
    data = archive(("app", "dir", ""), ("app/sub", "dir", ""),
                   ("app/early", "hard", "app/late.txt"), ("app/late.txt", "file", "x"),
                   ("app/todir", "hard", "app/sub"), ("app/ok", "hard", "./app//late.txt"))
    kept = kept_names(data)
    assert set(kept) == {"app", "app/sub", "app/late.txt", "app/ok"}
    assert kept["app/ok"].linkname == "app/late.txt"


def test_a_work_directory_that_is_a_link_is_dropped_whole():
    kept = kept_names(archive(("app", "sym", "/"), ("app/etc", "dir", "")))
    assert kept == {}


def _random_tree(seed: int) -> list[tuple[str, str, str]]:
    """A tree of directories, files and links whose targets walk through the names beside
    them (links included), ``.`` and ``..``, and end on ``tests/expected.txt`` or a name:
    most of them inside the work directory by their text."""
    rng = random.Random(seed)
    members = [("app", "dir", "")]
    children: dict[str, list[str]] = {"": []}  # directory (below app) -> names in it
    for index in range(120):
        parent = rng.choice(list(children))
        name = f"{parent}/n{index}".lstrip("/")
        kind, value = rng.choice(["dir", "file", "sym", "sym", "sym"]), ""
        if kind == "dir":
            children[name] = []
        elif kind == "file":
            value = "x"
        elif rng.random() < 0.3:
            value = rng.choice([".", ".."])
        else:
            steps = [rng.choice([".", "..", "..", *children[parent]])
                     for _ in range(rng.randint(1, 4))]
            steps += rng.choice([["tests", "expected.txt"], [], ["..", "logs"]])
            value = ("/app/" if rng.random() < 0.15 else "") + "/".join(steps)
        children[parent].append(f"n{index}")
        members.append((f"app/{name}", kind, value))
    return members


@pytest.mark.parametrize("seed", range(30))
def test_every_kept_entry_resolves_inside_on_a_real_file_system(tmp_path, seed):
    """Unpacked on this machine's own file system beside a /tests and a /logs, every kept
    entry that resolves at all resolves inside the work directory (the kernel's word)."""
    root = tmp_path / "root"
    for outside in ("tests", "logs", "app/.."):
        (root / outside).mkdir(parents=True, exist_ok=True)
    (root / "tests" / "expected.txt").write_text("secret")
    kept = confine(read_tree(io.BytesIO(archive(*_random_tree(seed)))), "/app")
    with tarfile.open(fileobj=io.BytesIO(kept.data)) as tar:
        tar.extractall(root, filter="fully_trusted")  # the engine's unpacking: no checks
    inside = os.path.realpath(root / "app")
    for folder, subdirs, files in os.walk(root / "app"):
        for name in subdirs + files:
            path = os.path.join(folder, name)
            if os.path.exists(path):  # resolves (a dangling or looping link does not)
                real = os.path.realpath(path)
                assert real == inside or real.startswith(inside + os.sep), (path, real)


def _files(count: int, depth: int = 0, name: str = "f") -> bytes:
    folder = "app" + "/d" * depth
    return archive(("app", "dir", ""),
                   *((folder[:4 + 2 * i], "dir", "") for i in range(1, depth + 1)),
                   *((f"{folder}/{name}{i}", "file", "") for i in range(count)))


@pytest.mark.parametrize(("data", "limits", "bound"), [
    (_files(30), TreeLimits(entries=20), "more than 20 entries"),
    (_files(1, depth=12), TreeLimits(depth=10), "more than 10 directories deep"),
    (_files(1, name="n" * 300), TreeLimits(name_bytes=200), "longer than 200 bytes"),
    (_files(40, name="n" * 200), TreeLimits(header_bytes=20 << 10), "MiB of tar headers"),
    (archive(("app", "dir", ""), *((f"app/l{i}", "sym", "x" * 100) for i in range(20))),
     TreeLimits(link_bytes=1024), "link targets of more than 1 KiB"),
    (archive(("app", "dir", ""), ("app/big", "file", "x" * 5000)),
     TreeLimits(data_bytes=4096), "more than 0 MiB of files"),
])
def test_a_tree_past_a_bound_stops_the_reading_and_names_the_bound(data, limits, bound):
    with pytest.raises(TreeTooLarge, match=bound):
        read_tree(io.BytesIO(data), limits)
    read_tree(io.BytesIO(data))  # within the default bounds
