"""Nothing of a run outlives it, and no tree it leaves can break the cleanup (issue 10, items
1 and 2): a double-forking, re-forking survivor is gone when the result comes back; a tree
1,500 levels deep (or chmod 000, or full of symbolic links) is removed, by the run's cleanup and
by the start-up sweep alike."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from helpers import TESTS_DIR
from helpers.judge_probe import processes_with
from helpers.local_sandbox import (
    RecordingProvider,
    attack_env,
    deep_tree,
    leftovers,
    own_cgroups,
)

from deepgym_ray.client import DeepGym
from deepgym_ray.judge.deepgym_proc import kill_uid
from deepgym_ray.sandboxes.local import workarea
from deepgym_ray.sandboxes.removal import remove_tree

# At import: a grandchild in its own session that execs an interpreter carrying MARK in its
# command line and keeps re-forking (each generation a new pid, the parent gone), so that a
# sweep listing /proc and then killing keeps missing it.
SURVIVOR = '''
import os, sys

LOOP = """
import os, time
while True:
    try:
        if os.fork():
            os._exit(0)
        os.setsid()
    except OSError:
        time.sleep(0.001)
"""

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", LOOP, "{mark}"])
    os._exit(0)

def attack():
    import time
    time.sleep(0.5)  # the survivor is re-forking at full speed by now
    return False  # judged 0 either way: the question is only whether anything survives
'''


@pytest.fixture
def provider():
    box = RecordingProvider()
    yield box
    box.close()


@pytest.mark.slow
@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "bwrap"])
def test_a_reforking_survivor_is_gone_when_the_result_returns(zygote):
    provider = RecordingProvider(solution_zygote=zygote)
    mark = "DGSURVIVOR" + uuid.uuid4().hex[:12]
    try:
        for _ in range(4):  # a sweep of /proc misses it only some of the time: try it a few
            result = DeepGym(provider=provider).run(attack_env(),
                                                    SURVIVOR.replace("{mark}", mark))
            survivors = processes_with(mark)  # at once: no grace for the cleanup to catch up
            assert result.has_verdict and result.score == 0.0
            assert survivors == []
            assert leftovers(provider) == []
    finally:
        provider.close()
        for run in provider.runs:  # so that a failure here leaves nothing running either
            if run["uid"] is not None:
                kill_uid(run["uid"], rounds=200, wait_for_zombies=False)
    assert processes_with(mark) == []
    assert own_cgroups() == []


DEEP_TREE = '''
import os

def _grow(depth):
    fd = os.open(".", os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.symlink("/", "root", dir_fd=fd)          # a link the cleanup must not follow
    os.mkdir("locked", dir_fd=fd)
    os.close(os.open("locked/f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    os.chmod("locked", 0, dir_fd=fd)              # unreadable but by root
    os.close(fd)

_grow(1500)

def attack():
    return False  # a wrong answer: it must get its 0, and leave nothing behind
'''


@pytest.mark.parametrize("tmpfs", [True, False], ids=["tmpfs", "host-disk"])
def test_a_tree_1500_levels_deep_gets_its_zero_and_is_removed(provider, tmpfs):
    provider._tmpfs = tmpfs and provider._tmpfs  # host-disk: the tree lands on the host's disk
    result = DeepGym(provider=provider).run(attack_env(), DEEP_TREE)
    assert result.has_verdict and result.score == 0.0, result
    assert leftovers(provider) == []


def test_the_startup_sweep_removes_any_tree_shape(monkeypatch, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    temp = tmp_path / "tmp"
    temp.mkdir()
    stale = temp / "deepgym-sol-999999999-abc"  # no such pid: its owner died mid-run
    stale.mkdir()
    deep_tree(stale, 3000)
    (stale / "to-outside").symlink_to(outside)
    (stale / "loop").symlink_to(stale)
    (stale / "locked").mkdir()
    (stale / "locked" / "f").write_text("x")
    (stale / "locked").chmod(0)
    monkeypatch.setattr(workarea.tempfile, "gettempdir", lambda: str(temp))
    monkeypatch.setattr(workarea, "_SWEPT", False)
    workarea.sweep_stale_dirs()
    assert not stale.exists()
    assert (outside / "keep").read_text() == "x"


def test_remove_tree_never_follows_links_and_needs_no_recursion(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_text("x")
    tree = tmp_path / "tree"
    tree.mkdir()
    deep_tree(tree, 5000)
    (tree / "dirlink").symlink_to(target)
    (tree / "filelink").symlink_to(target / "keep")
    (tree / "wide").mkdir()
    for i in range(300):
        (tree / "wide" / f"d{i}").mkdir()
    assert remove_tree(tree) is True
    assert not tree.exists() and (target / "keep").read_text() == "x"
    assert remove_tree(tmp_path / "missing") is True
    assert remove_tree(tmp_path / "target" / "keep") is True and target.exists()


SCORER = '''
import sys
from deepgym_ray.client import DeepGym
from deepgym_ray.models import Environment
sys.path.insert(0, {tests!r})
from helpers.local_sandbox import attack_env
DeepGym(mode="local", backend="threads").run(attack_env(timeout=120, case_timeout=100),
                                             {code!r})
'''

HANGING_SURVIVOR = SURVIVOR.replace("time.sleep(0.5)", "time.sleep(100)")


def test_nothing_outlives_a_scoring_process_killed_mid_run(monkeypatch):
    """A killed Ray actor has no chance to tear down: its runs' processes must die with it,
    and what it leaves (cgroups, directories, mounts) goes at the next provider's start."""
    import signal
    import subprocess
    import sys
    import time

    mark = "DGORPHAN" + uuid.uuid4().hex[:12]
    code = HANGING_SURVIVOR.replace("{mark}", mark)
    tests = str(TESTS_DIR)
    scorer = subprocess.Popen([sys.executable, "-c", SCORER.format(tests=tests, code=code)])
    try:
        deadline = time.monotonic() + 60
        while not processes_with(mark):  # the event: the survivor is up
            assert scorer.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        scorer.send_signal(signal.SIGKILL)
        scorer.wait()
    deadline = time.monotonic() + 20
    while processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel tears the zygote's PID namespace down
    survivors = processes_with(mark)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []
    monkeypatch.setattr(workarea, "_SWEPT", False)
    RecordingProvider().close()  # its start-up sweep takes what the dead scorer left
    tag = f"-{scorer.pid}-"
    assert not [p for p in Path("/tmp").glob("deepgym-*") if tag in p.name]
    assert not [m for m in workarea.mounts_under("/tmp") if tag in m]
    assert not _cgroups_named(f"deepgym{tag}")


def _cgroups_named(prefix: str) -> list[str]:
    """The cgroups whose name starts with ``prefix``. A walk that skips what vanishes under
    it: other tests' runs make and remove their groups meanwhile."""
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, name) for name in dirs if name.startswith(prefix)]
    return found
