"""Per-run aggregate limits of the local sandbox (issue 10, items 3 and 4): memory and
processes over all of a run's processes, disk space and inodes of its work area, and a CPU
share per run, so that a run's many busy processes cannot starve a neighbour. Each attack
scores 1.0 only if it worked; a solution stopped by a limit gets the model's 0 (a verdict)."""

from __future__ import annotations

import threading

import pytest
from helpers.local_sandbox import RecordingProvider, attack_env, leftovers

from deepgym_ray.client import DeepGym


@pytest.fixture(scope="module")
def provider():
    box = RecordingProvider(memory_mb=512, max_processes=24, disk_mb=64, max_files=500)
    missing = [name for name, held in box.limits.items() if not held]
    if missing:
        box.close()
        pytest.skip(f"needs root and cgroup v1 (missing here: {missing})")
    yield box
    box.close()
    assert leftovers(box) == []


def judge(provider, code: str, **env):
    result = DeepGym(provider=provider).run(attack_env(**env), code)
    assert leftovers(provider) == []
    return result


MEMORY = '''
import os

def attack():
    release_r, release_w = os.pipe()  # never written: each child holds its block until the end
    readers, kids = [], []
    for _ in range(4):  # 4 x 200 MB, each under the 512 MB per-process limit
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(release_w)
            block = b"x" * (200 << 20)
            os.write(w, b"1")
            os.read(release_r, 1)  # a child that let go first would make "at once" a lie
            os._exit(0)
        os.close(w)
        readers.append(r)
        kids.append(pid)
    held = sum(len(os.read(r, 1)) for r in readers)
    # The OOM killer may take a child after it reported (to make room for the last): only
    # children still alive now hold their block.
    alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in kids)
    return held == 4 and alive == 4  # 800 MB at once in a 512 MB run
'''


def test_memory_is_limited_across_the_runs_processes(provider):
    result = judge(provider, MEMORY)
    assert result.score == 0.0 and result.has_verdict, result


DISK = '''
def attack():
    chunk = b"x" * (1 << 20)
    try:
        for i in range(6):  # 6 x 16 MB, each under the 64 MB per-file limit: 96 MB in 64 MB
            with open(f"f{i}", "wb") as f:
                for _ in range(16):
                    f.write(chunk)
    except OSError:
        return False
    return True
'''


def test_disk_space_is_limited_across_the_runs_files(provider):
    assert judge(provider, DISK).score == 0.0


INODES = '''
import os

def attack():
    try:
        for i in range(2000):  # empty files: no size limit ever bites
            os.close(os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError:
        return False
    return True
'''


def test_inodes_are_limited_across_the_runs_files(provider):
    assert judge(provider, INODES).score == 0.0


THREADS = '''
import threading

def attack():
    started, never = [], threading.Event()  # each thread lives to the end: all 40 at once
    try:
        for _ in range(40):  # threads count: 40 in a run of 24 tasks
            t = threading.Thread(target=never.wait, daemon=True)
            t.start()
            started.append(t)
    except RuntimeError:
        return False
    return True
'''


def test_tasks_are_limited_across_the_run(provider):
    assert judge(provider, THREADS).score == 0.0


BUSY_NEIGHBOUR = '''
import os, time

def attack():
    """16 busy processes for 4 s; returns the CPU they got, in cores (a wrong answer's 0)."""
    readers = []
    for _ in range(16):
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()  # each its own session: the kernel's autogroups cannot pool them
            end = time.monotonic() + 4
            while time.monotonic() < end:
                pass
            os.write(w, repr(time.process_time()).encode())
            os._exit(0)
        os.close(w)
        readers.append(r)
    return sum(float(os.read(r, 64) or 0) for r in readers) / 4
'''

# Busy for 2 s of wall time while the neighbour is busy; returns the CPU it got, in cores.
PROBE = '''
import time

def attack():
    time.sleep(1.0)  # the neighbour's processes are up by now
    wall, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - wall < 2.0:
        pass
    return (time.process_time() - cpu) / (time.monotonic() - wall)
'''


@pytest.mark.slow
def test_a_runs_many_busy_processes_do_not_starve_a_neighbour(provider):
    """Both runs are busy at once; each gets the CPU of one run, not of one process: without
    a share per run the probe gets 1/16 of what the neighbour's 16 processes get together.
    (A ratio measured side by side, so the machine's other load mostly cancels out.)

    Up to three measurements: in a full suite on a machine whose cores another process kept
    busy, one measurement gave the probe 0.06 cores against the neighbour's 0.44 (the same
    test alone under that load: 0.63 against 0.87). Without a share per run every
    measurement is near 1/16, whatever the load, so a second chance cannot pass it."""
    client = DeepGym(provider=provider)
    measured = []
    for _ in range(3):
        results = {}

        def neighbour(results=results) -> None:
            results["neighbour"] = client.run(attack_env(), BUSY_NEIGHBOUR)

        thread = threading.Thread(target=neighbour)
        thread.start()
        results["probe"] = client.run(attack_env(), PROBE)
        thread.join()
        assert results["neighbour"].score == 0.0 and results["probe"].score == 0.0
        probe, busy = (float(results[k].details) for k in ("probe", "neighbour"))
        measured.append((probe, busy))
        if probe > 0.4 * busy:
            break
    else:
        pytest.fail(f"the probe never got its share (probe, neighbour cores): {measured}")
    assert leftovers(provider) == []
