"""An eval that is stopped: SIGINT and SIGTERM save and summarise what finished; SIGKILL of a
command that started its own Ray leaves no process behind; and the default picks the backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from deepgym_ray.pool.reaper import TAG_VARIABLE, tagged_processes

pytestmark = pytest.mark.e2e


def _start_eval(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path, str]:
    out = tmp_path / "results.jsonl"
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_VARIABLE: tag, "RAY_ADDRESS": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", "builtin", "--reference",
         "--no-progress", "--max-parallel", "2", "--out", str(out), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out, tag


def _wait_for_results(proc: subprocess.Popen, out: Path, count: int) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"eval ended or stalled before {count} results: {proc.poll()}")


def _wait_gone(tag: str) -> list[int]:
    deadline = time.monotonic() + 60
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_eval_saves_and_summarises_what_finished(tmp_path, signum):
    proc, out, tag = _start_eval(tmp_path, "--backend", "threads")
    _wait_for_results(proc, out, 2)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    saved = out.read_text().splitlines()
    assert all(json.loads(line)["task_id"] for line in saved)
    assert f"interrupted after {len(saved)} of 20 runs" in stdout
    assert "Pass Rate" in stdout and "rerun the same command to resume" in stderr
    assert _wait_gone(tag) == []


def test_sigkill_of_an_eval_with_its_own_ray_leaves_no_process(tmp_path):
    proc, out, tag = _start_eval(tmp_path, "--backend", "ray")
    _wait_for_results(proc, out, 1)
    assert len(tagged_processes(tag)) > 3  # Ray's own processes, started for this command
    proc.kill()
    proc.wait(timeout=30)
    assert _wait_gone(tag) == []


def test_without_a_cluster_the_default_scores_without_ray_and_says_so(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", "coin_change", "--reference",
         "--no-progress"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "No Ray cluster is running: scoring on this machine without Ray" in done.stderr
    assert "Pass Rate: 100.00%" in done.stdout
