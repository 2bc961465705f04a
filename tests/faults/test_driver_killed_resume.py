"""The driver of an eval killed mid-run (its whole process group, like a lost machine), then
the same eval run again with the same --out: every answer judged exactly once, right ones
passed, wrong ones not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for tests/helpers
from helpers.wrong_solutions import SUBTLY_WRONG  # noqa: E402

from deepgym_ray.suites import load_environment  # noqa: E402

pytestmark = pytest.mark.e2e

ENVS = sorted(SUBTLY_WRONG)[:10]


def _solutions(path: Path) -> dict[tuple[str, int], bool]:
    """Sample 0 of each task is its reference (right), sample 1 a subtly wrong answer."""
    expected, lines = {}, []
    for name in ENVS:
        lines.append({"task_id": name, "code": load_environment(name).reference_solution})
        lines.append({"task_id": name, "code": SUBTLY_WRONG[name]})
        expected[(name, 0)], expected[(name, 1)] = True, False
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return expected


def _command(solutions: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "deepgym_ray.cli", "eval", "builtin", "--solutions",
            str(solutions), "--mode", "local", "--backend", "ray", "--max-parallel", "2",
            "--no-progress", "--out", str(out)]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_killed_driver_resumes_without_false_results(tmp_path):
    solutions, out = tmp_path / "solutions.jsonl", tmp_path / "results.jsonl"
    expected = _solutions(solutions)
    env = dict(os.environ, RAY_ADDRESS="local")  # an embedded Ray of its own
    log = tmp_path / "first.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(_command(solutions, out), env=env, start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        # The event: the results file has grown (checked often, with a bound on the wait).
        deadline = time.monotonic() + 300
        while len(_lines(out)) < 4:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no results appeared"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    before = _lines(out)
    assert 4 <= len(before) < len(expected), "the eval finished before it could be killed"

    rerun = subprocess.run(_command(solutions, out), env=env, capture_output=True, text=True,
                           timeout=900)
    assert rerun.returncode in (0, 1), rerun.stdout[-2000:] + rerun.stderr[-2000:]
    records = [json.loads(line) for line in _lines(out)]
    counts = Counter((r["task_id"], r["sample"]) for r in records)
    assert counts == Counter(dict.fromkeys(expected, 1))  # exactly one result per input
    for record in records:
        right = expected[(record["task_id"], record["sample"])]
        assert record["has_verdict"], record  # nothing here is an outage
        assert record["passed"] is right, record  # no false 0, no false pass
    assert _lines(out)[: len(before)] == before  # what was written before stays as it was
