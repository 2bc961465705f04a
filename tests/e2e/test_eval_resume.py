"""Kill `deepgym-ray eval` midway, run it again with the same --out: every result exactly once.

On threads the eval is alone; on Ray it is a driver of the session's running Ray instance, as on
a cluster, with a pool of its own that outlives the killed driver. (An embedded Ray start per
eval was tried first: on a machine whose cores are all busy, Ray's fixed 30 s wait for its
raylet ran out three times in a row, and the test failed for that, not for resuming.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

pytestmark = pytest.mark.e2e

TASKS = 40


def _command(out_file, backend, pool_name):
    pool = []
    if backend == "ray":  # taking none of the session's CPUs, which other pools may hold
        config = out_file.with_name("pool.yaml")
        config.write_text(f"pool:\n  name: {pool_name}\n  actors: 2\n"
                          "  num_cpus_per_actor: 0\n")
        pool = ["--config", str(config)]
    return [sys.executable, "-m", "deepgym_ray.cli", "eval", "humaneval", "--reference",
            "--limit", str(TASKS), "--mode", "local", "--backend", backend, *pool,
            "--max-parallel", "2", "--no-progress", "--out", str(out_file)]


@pytest.fixture(params=["threads", "ray"])
def backend(request):
    """The backend, and on Ray the address of the session's instance for the eval to join."""
    if request.param == "threads":
        yield "threads", {}
        return
    ray = request.getfixturevalue("ray_local")
    yield "ray", {"RAY_ADDRESS": ray.get_runtime_context().gcs_address}


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def _kill_group(proc):
    """Kill the eval and everything it started (its own process group), like a lost node."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_killed_eval_resumes_with_every_result_once(tmp_path, backend):
    backend, address = backend
    pool_name = f"resume-{uuid.uuid4().hex[:8]}"
    try:
        _kill_and_resume(tmp_path / "results.jsonl", backend, pool_name, {**os.environ, **address})
    finally:
        if backend == "ray":
            from deepgym_ray.pool.admin import shutdown_pools

            shutdown_pools(pool_name)


def _kill_and_resume(out_file, backend, pool_name, env):
    command = _command(out_file, backend, pool_name)
    proc = subprocess.Popen(command, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while len(_lines(out_file)) < 5:
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "no results appeared"
            time.sleep(0.05)
    finally:
        _kill_group(proc)
    before = _lines(out_file)
    assert 5 <= len(before) < TASKS, "the eval finished before it could be killed"
    # A kill in the middle of a write leaves half a line: the rerun must cope with it too.
    with out_file.open("a") as handle:
        handle.write(before[-1][: len(before[-1]) // 2])

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"Resuming: {len(before)} of {TASKS} results already in" in rerun.stderr
    assert f"Runs: {TASKS} (judged {TASKS}, no verdict 0)" in rerun.stdout
    assert "Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)" in rerun.stdout

    records = [json.loads(line) for line in _lines(out_file)]
    counts = Counter((r["task_id"], r["sample"]) for r in records)
    assert counts == Counter({(f"humaneval/{i}", 0): 1 for i in range(TASKS)})
    assert all(r["passed"] and r["has_verdict"] for r in records)
    # What was written before the kill stayed as it was.
    assert _lines(out_file)[: len(before)] == before
