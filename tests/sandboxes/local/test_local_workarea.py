"""The runners' work root and the cleanup of a run's directories (issue 15's speed work).

As root, every run's work directory (the runner's: judge files, verifier, tests) lies on a tmpfs
of the provider's own; it goes away with the provider, or with the start-up sweep when the
provider died. A run's directories are removed with its known tmpfs detached first, and the
removal never walks into a file system mounted inside the tree (it unmounts first instead), so
a mount it did not expect is neither emptied nor left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from deepgym_ray.sandboxes.local import LocalProvider, workarea
from deepgym_ray.sandboxes.removal import remove_tree
from deepgym_ray.suites import load_environment


def _mounted(path: Path) -> bool:
    return str(path) in workarea.mounts_under(path)


def _fs_type(path: Path) -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        if fields[4] == str(path):
            return fields[fields.index("-") + 1]
    return None


def test_run_work_dirs_lie_on_the_providers_own_tmpfs_which_goes_with_it():
    provider = LocalProvider()
    env = load_environment("coin_change")
    boxes = [provider.create(env) for _ in range(2)]
    roots = {box.handle.work_dir.parent for box in boxes}
    assert len(roots) == 1  # one mount for all the provider's runs, not one each
    root = roots.pop()
    assert root.parent == Path(tempfile.gettempdir())
    assert root.name.startswith(f"deepgym-run-{os.getpid()}-w")
    assert _fs_type(root) == "tmpfs" and (root.stat().st_mode & 0o777) == 0o700
    provider.put_files(boxes[0], {"big.txt": b"x" * 100_000})
    for box in boxes:
        provider.destroy(box)
    provider.close()
    assert not root.exists() and not _mounted(root)
    # A later run makes the root again.
    box = provider.create(env)
    assert _fs_type(box.handle.work_dir.parent) == "tmpfs"
    provider.destroy(box)
    provider.close()
    assert not box.handle.work_dir.parent.exists()


def test_remove_tree_never_walks_into_a_mounted_file_system(tmp_path):
    tree = tmp_path / "tree"
    (tree / "mnt").mkdir(parents=True)
    (tree / "plain.txt").write_text("x")
    workarea.mount_tmpfs(tree / "mnt", uid=0)
    try:
        (tree / "mnt" / "keep.txt").write_text("still here")
        assert remove_tree(tree, quiet=True) is False
        assert (tree / "mnt" / "keep.txt").read_text() == "still here"
    finally:
        workarea.unmount_under(tree)
    assert remove_tree(tree) is True and not tree.exists()


def test_discard_detaches_the_known_mount_and_still_finds_one_it_was_not_told_of(tmp_path):
    work, holder = tmp_path / "work", tmp_path / "holder"
    known, stray = holder / "sol", work / "extra"
    for path in (known, stray):
        path.mkdir(parents=True)
        workarea.mount_tmpfs(path, uid=0)
        (path / "f.txt").write_text("x")
    assert workarea.discard(work, holder, mounted=(known,)) is True
    assert not work.exists() and not holder.exists()
    assert workarea.mounts_under(tmp_path) == []


def test_the_startup_sweep_unmounts_and_removes_a_dead_providers_work_root(monkeypatch,
                                                                          tmp_path):
    monkeypatch.setattr(workarea.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(workarea, "_SWEPT", False)
    stale = tmp_path / "deepgym-run-999999999-wabc"  # no such pid: its provider died
    stale.mkdir()
    workarea.mount_tmpfs(stale, uid=0)
    (stale / "deepgym-run-999999999-xyz").mkdir()
    (stale / "deepgym-run-999999999-xyz" / "verifier.py").write_text("x")
    workarea.sweep_stale_dirs()
    assert not stale.exists() and workarea.mounts_under(tmp_path) == []


KILLED_MID_RUN = """
import os, signal, sys, tempfile, threading, time
from deepgym_ray.client import DeepGym
from deepgym_ray.suites import load_environment
from deepgym_ray.sandboxes.local import LocalProvider
from deepgym_ray.sandboxes.local.workarea import mounts_under

provider = LocalProvider()
env = load_environment("coin_change")
client = DeepGym(provider=provider)
print("first", client.run(env, env.reference_solution).score, flush=True)
hang = "import time\\ndef coin_change(coins, amount):\\n    time.sleep(600)\\n"
before = len(mounts_under(tempfile.gettempdir()))  # the roots: the first run mounted them
threading.Thread(target=client.run, args=(env, hang), daemon=True).start()
while len(mounts_under(tempfile.gettempdir())) <= before:  # the second run's tmpfs is mounted
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)  # as Ray ends a worker: no clean-up of ours runs
"""


def test_a_killed_providers_mounts_and_directories_go_with_it(tmp_path):
    """A process killed mid-run leaves no mount and no directory in its temp directory, even
    one that no later provider ever sweeps (its janitor releases them)."""
    if os.geteuid() != 0:
        pytest.skip("the work area is a tmpfs only as root")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_RUN], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == -9 and "first 1.0" in proc.stdout, proc.stderr[-3000:]
    left = None
    for _ in range(300):  # the janitor works once the process is gone: wait for it, bounded
        left = workarea.mounts_under(tmp_path) + [p.name for p in tmp_path.glob("deepgym-*")]
        if not left:
            break
        time.sleep(0.1)
    assert not left, left
