"""Kill `deepgym-ray eval` midway, run it again with the same --out: every result exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

pytestmark = pytest.mark.e2e

TASKS = 40


def _command(out_file, backend):
    return [sys.executable, "-m", "deepgym_ray.cli", "eval", "humaneval", "--reference",
            "--limit", str(TASKS), "--mode", "local", "--backend", backend,
            "--max-parallel", "2", "--no-progress", "--out", str(out_file)]


def _env():
    env = dict(os.environ)
    env["RAY_ADDRESS"] = "local"  # an embedded Ray of its own, never another test's cluster
    return env


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def _kill_group(proc):
    """Kill the eval and everything it started (its own process group), like a lost node."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@pytest.mark.parametrize("backend", ["threads", "ray"])
def test_killed_eval_resumes_with_every_result_once(tmp_path, backend):
    out_file = tmp_path / "results.jsonl"
    proc = subprocess.Popen(_command(out_file, backend), env=_env(), start_new_session=True,
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

    rerun = subprocess.run(_command(out_file, backend), env=_env(), capture_output=True,
                           text=True, timeout=600)
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
