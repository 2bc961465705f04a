"""A task container's commands on a real Docker engine, their output taken from a file of their
own: nothing is lost when the engine's attach stream drops it (as dockerd does to a command
that ends while the machine is loaded), and nothing but the command's own output is read."""

from __future__ import annotations

import pytest

from deepgym_ray.sandboxes.docker.task_container import TaskContainer, TaskLimits

pytestmark = pytest.mark.e2e

LABELS = {"deepgym-test": "task-container"}


class _StreamDropped:
    """The engine's client, with every exec's attach stream ending before its first byte."""

    def __init__(self, api):
        self._api = api

    def exec_start(self, exec_id, **kwargs):
        self._api.exec_start(exec_id, **kwargs)  # the command runs; its stream is not read
        return iter(())

    def __getattr__(self, name):
        return getattr(self._api, name)


@pytest.fixture
def box(docker_client):
    from helpers.docker_engine import TEST_IMAGE

    api = _StreamDropped(docker_client.provider._client())
    started = TaskContainer.start(api, TEST_IMAGE, TaskLimits(output_bytes=4096), LABELS)
    try:
        yield started
    finally:
        assert started.remove() is None


def test_the_output_survives_a_dropped_attach_stream(box):
    done = box.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], user="65534:65534",
                    timeout=60)
    assert (done.exit_code, done.timed_out) == (3, False)
    assert sorted(done.stdout.decode().split()) == ["err", "out"], done.stdout


def test_a_flood_keeps_its_last_bytes(box):
    done = box.exec(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; echo END"],
                    user="65534:65534", timeout=60)
    assert done.exit_code == 0
    assert done.stdout.startswith(b"[") and b"bytes of output left out]" in done.stdout
    assert done.stdout.endswith(b"x" * 100 + b"END\n"), done.stdout[-200:]
    assert len(done.stdout) < 4096 + 100


def test_a_command_that_times_out_keeps_its_output_so_far(box):
    done = box.exec(["sh", "-c", "echo started; sleep 600"], user="65534:65534", timeout=2)
    assert (done.exit_code, done.timed_out) == (None, True)
    assert done.stdout == b"started\n"


def test_an_output_file_swapped_for_a_link_is_not_followed(box):
    """The command owns its output file and may put a link to a file it cannot read in its
    place: what comes back is not the file linked to."""
    swap = 'out=$(readlink /proc/$$/fd/1); rm -f "$out"; ln -s /etc/shadow "$out"; echo x'
    done = box.exec(["sh", "-c", swap], user="0", timeout=60)
    assert done.exit_code == 0
    assert b"root:" not in done.stdout, done.stdout
