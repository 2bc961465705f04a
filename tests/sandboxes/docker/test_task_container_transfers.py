"""A task container's moves of data an answer made, on a real engine: each bounded in time by
a budget for its size (past it: TransferTimedOut, which the caller judges as the answer's),
files read out without following anything, and a container layer the engine cannot measure in
time counted as an overrun (the disk watch never goes blind)."""

from __future__ import annotations

import io
import tarfile

import pytest

from deepgym_ray.exceptions import ProviderTimeoutError
from deepgym_ray.sandboxes.docker import task_container
from deepgym_ray.sandboxes.docker.task_container import (
    ArchiveTooLarge,
    TaskContainer,
    TaskLimits,
    TransferTimedOut,
)

LABELS = {"deepgym-test": "task-container-transfers"}


@pytest.fixture
def box():
    from helpers.docker_engine import TEST_IMAGE, docker_skip_reason

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    import docker

    api = docker.from_env(timeout=60).api
    started = TaskContainer.start(api, TEST_IMAGE, TaskLimits(), LABELS)
    try:
        yield started
    finally:
        assert started.remove() is None


def _tree(entries: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folder = tarfile.TarInfo("work")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for index in range(entries):
            tar.addfile(tarfile.TarInfo(f"work/{index}"), io.BytesIO(b""))
    return buffer.getvalue()


def test_a_move_past_its_budget_is_transfer_timed_out(box):
    with pytest.raises(TransferTimedOut, match="took longer than"):
        box.put_tar("/", _tree(2000), timeout=0.001)
    box.put_tar("/", _tree(2000), timeout=box.transfer_timeout(entries=2001,
                                                               components=4001))
    with pytest.raises(TransferTimedOut):
        with box.open_archive("/work", timeout=0.001) as body:
            body.read()
    assert issubclass(TransferTimedOut, ProviderTimeoutError)  # no verdict unless judged
    with box.open_archive("/work") as body:
        with tarfile.open(fileobj=body, mode="r|") as tar:
            assert len(list(tar)) == 2001


def test_files_are_read_without_following_anything(box):
    made = box.exec(["sh", "-c", "mkdir -p /r && echo 0.5 > /r/reward.txt && "
                     "ln -s /etc/hostname /r/link && echo x > /r/file && "
                     "ln -s /r/loop /r/loop && head -c 5000 /dev/zero > /r/big"], user="0",
                    timeout=60)
    assert made.exit_code == 0, made
    assert box.read_file("/r/reward.txt", 100) == b"0.5\n"
    # what is no file to read: a link, nothing, a path through a file or a loop, a directory
    for path in ("/r/link", "/r/missing", "/r/file/below", "/r/loop", "/r/loop/x", "/r"):
        assert box.read_file(path, 100) is None, path
    with pytest.raises(ArchiveTooLarge):
        box.read_file("/r/big", 4096)


def test_a_layer_the_engine_cannot_measure_in_time_is_an_overrun(box, monkeypatch):
    """Each look at the container's layer walks every file in it: a command that leaves many
    (here 100,000, with the looks' timeout scaled down from 30 s to 10 ms) makes the looks
    outlast their timeout, and two in a row stop it as past the disk limit (the watch used
    to see 0 bytes then, and let the command write on unwatched)."""
    monkeypatch.setattr(task_container, "DISK_QUERY_TIMEOUT", 0.01)
    many = ("import os\nos.mkdir('/many')\n"
            "for i in range(100000): open('/many/%d' % i, 'w').close()\n")
    done = box.exec(["sh", "-c", f'python3 -c "{many}" && sleep 600'], user="0", timeout=300)
    assert box.disk_exceeded and not done.timed_out, done
    assert "more files in the container than the engine can measure" in box.overrun
