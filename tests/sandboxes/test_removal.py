"""Removing a tree that untrusted code shaped (``deepgym_ray.sandboxes.removal``), on the host
and in a Docker container's agent, which cleans up with the same module."""

from __future__ import annotations

import os

from helpers.local_sandbox import deep_tree

from deepgym_ray.sandboxes import removal
from deepgym_ray.sandboxes.docker import cleanup


def _wide(root: str, directories: int) -> None:
    for i in range(directories):
        os.makedirs(os.path.join(root, f"w{i}", "inner"))
        with open(os.path.join(root, f"w{i}", "f"), "w") as handle:
            handle.write("x")


class _CountedListing:
    """``os.scandir`` that counts the entries it hands out."""

    def __init__(self, real, seen: list[int]) -> None:
        self.real, self.seen = real, seen

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.real.close()

    def __iter__(self):
        for entry in self.real:
            self.seen[0] += 1
            yield entry


def test_every_entry_is_listed_at_most_twice_whatever_the_shape(tmp_path, monkeypatch):
    # Listing a directory again for each of its subdirectories is quadratic in a wide tree; so
    # is rebuilding each path from the top in a deep one (the Docker agent's old walk: seconds
    # for 1,500 levels, tens of them on a busy machine, past the host's wait for its answer).
    root = str(tmp_path / "tree")
    deep_tree(os.path.join(root, "deep"), 1500)
    _wide(os.path.join(root, "wide"), 300)
    os.chmod(os.path.join(root, "wide", "w7"), 0)
    entries = 2 + 1500 + 300 * 3
    seen = [0]
    real_scandir = os.scandir
    monkeypatch.setattr(removal.os, "scandir",
                        lambda target: _CountedListing(real_scandir(target), seen))
    assert removal.remove_tree(root)
    assert not os.path.lexists(root)
    assert seen[0] <= 2 * entries, (seen[0], entries)


def test_the_docker_agent_removes_with_the_same_walk(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    root = str(tmp_path / "work")
    deep_tree(os.path.join(root, "deep"), 1500)
    os.symlink(outside, os.path.join(root, "link"))  # unlinked, never followed
    assert cleanup.remove is not None and cleanup.remove_tree is removal.remove_tree
    assert cleanup.remove(root)
    assert not os.path.lexists(root)
    assert (outside / "keep").read_text() == "mine"
