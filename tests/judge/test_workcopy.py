"""The copy of an agent's work directory that a session verifier reads: regular files and
directories through descriptors, a link only as a copy of a file of the tree it names by its own
names, nothing else; every bound the agent controls refused with the bound named."""

from __future__ import annotations

import json
import os
import socket

import pytest

from deepgym_ray.judge import deepgym_workcopy
from deepgym_ray.judge.deepgym_workcopy import COPY_NAME, CopyRefused, copy_tree, take_copy


def tree(root, files):
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def listing(root):
    """path -> ('dir',) or ('file', text, mode & 0o777), links included as what they are."""
    found = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[rel] = ("dir",)
            else:
                with open(path) as f:
                    found[rel] = ("file", f.read(), os.stat(path).st_mode & 0o777)
    return found


def test_files_and_directories_are_copied_with_their_times_and_execute_bits(tmp_path):
    source = tmp_path / "work"
    tree(source, {"a.txt": "one", "sub/deeper/b.py": "print(2)", "run.sh": "echo hi"})
    (source / "run.sh").chmod(0o700)
    (source / "a.txt").chmod(0o400)
    os.utime(source / "a.txt", ns=(10**18, 10**18))
    report = copy_tree(source, tmp_path / "copy")
    assert listing(tmp_path / "copy") == {
        "a.txt": ("file", "one", 0o644), "run.sh": ("file", "echo hi", 0o755),
        "sub": ("dir",), "sub/deeper": ("dir",), "sub/deeper/b.py": ("file", "print(2)", 0o644)}
    assert os.stat(tmp_path / "copy" / "a.txt").st_mtime_ns == 10**18
    assert (report.files, report.directories, report.bytes) == (3, 2, 3 + 8 + 7)
    assert report.note() is None


def test_a_link_becomes_a_copy_of_the_file_it_names_inside_the_tree_else_is_left_out(
        tmp_path):
    source = tmp_path / "work"
    tree(source, {"out/v2.json": "{}", "out/deep/f.txt": "f"})
    outside = tmp_path / "secret.txt"
    outside.write_text("SECRET")
    links = {"latest.json": "out/v2.json", "dotted.json": "./out//v2.json",
             "out/same.txt": "deep/f.txt",  # relative to the link's own folder
             "up.txt": "../secret.txt", "abs.txt": str(outside),
             "proc.txt": "/proc/self/cwd/secret.txt", "dir": "out", "chain.json": "latest.json",
             "through.txt": "dir/v2.json", "dangling": "nowhere", "empty_dots": "./."}
    for name, target in links.items():
        os.symlink(target, source / name)
    report = copy_tree(source, tmp_path / "copy")
    got = listing(tmp_path / "copy")
    assert got["latest.json"] == got["dotted.json"] == ("file", "{}", 0o644)
    assert got["out/same.txt"] == ("file", "f", 0o644)
    for left in ("up.txt", "abs.txt", "proc.txt", "dir", "chain.json", "through.txt",
                 "dangling", "empty_dots"):
        assert left not in got
    assert not any(kind == "link" for kind, *_ in got.values())
    why = dict(report.left_out)
    assert why["up.txt"] == "a link to ../secret.txt (leads up)"
    assert why["abs.txt"].endswith("(absolute)") and why["proc.txt"].endswith("(absolute)")
    assert why["dir"] == "a link to out (not a file of the tree)"
    assert why["chain.json"] == "a link to latest.json (not a file of the tree)"
    assert why["through.txt"] == "a link to dir/v2.json (not through directories of the tree)"
    assert why["empty_dots"] == "a link to ./. (empty)"
    assert "SECRET" not in str(got)
    assert report.note().startswith("left out of the work directory the verifier read: ")


def test_fifos_and_sockets_are_left_out_without_being_opened(tmp_path):
    source = tmp_path / "work"
    source.mkdir()
    os.mkfifo(source / "pipe")  # opening it to read would wait for a writer forever
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(source / "sock"))
        report = copy_tree(source, tmp_path / "copy")
    assert listing(tmp_path / "copy") == {}
    assert sorted(report.left_out) == [("pipe", "not a file, directory or link"),
                                       ("sock", "not a file, directory or link")]


def test_the_work_directory_itself_must_not_be_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "work")
    with pytest.raises(CopyRefused, match="cannot be opened"):
        copy_tree(tmp_path / "work", tmp_path / "copy")


@pytest.mark.parametrize(("shape", "message"), [
    ("deep", "more than 64 directories deep"),
    ("long", "longer than 4096 bytes"),
    ("many", "more than 100 entries"),
    ("big", "more than 1000 bytes"),
    ("big_by_links", "more than 1000 bytes"),
])
def test_a_tree_over_a_bound_is_refused_naming_the_bound(tmp_path, monkeypatch, shape,
                                                         message):
    # The capacity of the work area, as read off its file system (a tmpfs of the agent's limits
    # in a sandbox), made small here.
    monkeypatch.setattr(deepgym_workcopy, "_capacity", lambda fd: (1000, 100))
    source = tmp_path / "work"
    source.mkdir()
    if shape in ("deep", "long"):  # made folder by folder: the whole path is past PATH_MAX
        fd = os.open(source, os.O_RDONLY)
        for _ in range(65 if shape == "deep" else 21):
            name = "d" if shape == "deep" else "n" * 200
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
    elif shape == "many":
        tree(source, {f"f{i}": "" for i in range(101)})
    elif shape == "big":
        tree(source, {"a": "x" * 600, "b": "y" * 600})
    else:  # a link is copied as the file it names: each copy counts
        tree(source, {"a": "x" * 600})
        os.symlink("a", source / "again")
    with pytest.raises(CopyRefused, match=message):
        copy_tree(source, tmp_path / "copy")


def test_the_bounds_are_the_capacity_of_the_work_area(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        size, entries = deepgym_workcopy._capacity(fd)
        found = os.fstatvfs(fd)
    finally:
        os.close(fd)
    assert size == min(found.f_blocks * found.f_frsize, deepgym_workcopy.MAX_BYTES)
    assert entries == min(found.f_files, deepgym_workcopy.MAX_ENTRIES) or found.f_files == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_what_the_copier_cannot_read_is_left_out_and_named(tmp_path):
    # As a runner without the rights to read everything would meet it (a mode 0o001 folder, a
    # file of mode 000 not its own).
    source = tmp_path / "work"
    tree(source, {"ok.txt": "fine", "hidden/x.txt": "x", "locked.txt": "secret",
                  "listed/y.txt": "y"})
    (source / "hidden").chmod(0o001)
    (source / "locked.txt").chmod(0o000)
    (source / "listed").chmod(0o444)  # its names can be read, nothing beneath them
    (tmp_path / "out").mkdir()
    os.chown(tmp_path / "out", 65534, 65534)
    tmp_path.chmod(0o755)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copier as another user (nobody), with no right to read everything
        try:
            os.chdir(tmp_path)  # (its parents are root's alone)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            report = copy_tree("work", "out/copy")
            os.write(write, json.dumps(report.left_out).encode())
        except BaseException as exc:  # noqa: B036 - said to the parent, whatever it was
            os.write(write, json.dumps(repr(exc)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        left_out = json.loads(pipe.read() or "null")
    os.waitpid(pid, 0)
    assert sorted(map(tuple, left_out)) == [
        ("hidden/", "a directory the judge cannot read"),
        ("listed/y.txt", "a file the judge cannot read"),
        ("locked.txt", "a file the judge cannot read")]
    assert listing(tmp_path / "out" / "copy") == {"ok.txt": ("file", "fine", 0o644),
                                                  "listed": ("dir",)}


def test_take_copy_replaces_an_old_copy_and_dates_a_refusal_by_whether_the_agent_acted(
        tmp_path, monkeypatch):
    source, runner = tmp_path / "work", tmp_path / "runner"
    tree(source, {"answer.txt": "42"})
    runner.mkdir()
    tree(runner / COPY_NAME, {"stale.txt": "from a step before"})
    copy, note, refused = take_copy({"from": str(source), "acted": True}, str(runner))
    assert refused is None and note is None and copy == str(runner / COPY_NAME)
    assert listing(copy) == {"answer.txt": ("file", "42", 0o644)}

    (source / os.path.join(*["d"] * 65)).mkdir(parents=True)
    _, _, after = take_copy({"from": str(source), "acted": True}, str(runner))
    assert after["kind"] == "verdict" and after["error_type"] == "policy_sandbox_failure"
    assert after["score"] == 0.0 and after["in_play"] and "64 directories deep" in \
        after["details"]
    assert not (runner / COPY_NAME).exists()  # nothing half-copied is left
    _, _, before = take_copy({"from": str(source), "acted": False}, str(runner))
    assert before["kind"] == "verifier_failed" and not before["in_play"]


def test_a_copy_that_fails_on_the_judges_side_has_no_verdict(tmp_path):
    # Nothing of the agent's is left unbounded, so a failure beyond the bounds is ours: here
    # the runner's own directory is read-only to it.
    tree(tmp_path / "work", {"answer.txt": "42"})
    (tmp_path / "runner").mkdir(mode=0o555)
    tmp_path.chmod(0o755)
    pid = os.fork()
    if pid == 0:  # as a runner that is not root (root writes anywhere)
        os._exit(_failed_copy_kind(tmp_path))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2  # "verifier_failed", not in play


def _failed_copy_kind(where):
    import ctypes  # noqa: F401 - imported while the interpreter's own folder can be read
    import shutil  # noqa: F401

    try:
        os.chdir(where)  # (its parents are root's alone)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        _, _, refused = take_copy({"from": "work", "acted": True}, "runner")
        return 2 if refused and refused["kind"] == "verifier_failed" \
            and not refused["in_play"] else 1
    except BaseException:  # noqa: B036 - reported by the exit code
        return 3
