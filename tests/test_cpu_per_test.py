"""scripts/cpu_per_test.py: the plugin that says what each test cost the machine in CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def test_each_test_gets_a_line_with_the_cpu_the_machine_spent_and_the_summary_lists_them(
        tmp_path):
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import time

        def test_burns():
            start = time.process_time()
            while time.process_time() - start < 0.3:
                pass

        def test_waits():
            time.sleep(0.2)
    """))
    out = tmp_path / "cpu.tsv"
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "CPU_PER_TEST_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "cpu_per_test",
         "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert [row[2] for row in rows] == ["test_sample.py::test_burns",
                                        "test_sample.py::test_waits"]
    assert float(rows[0][0]) >= 0.25  # the machine spent at least the test's own 0.3 s
    assert float(rows[1][1]) >= 0.2  # the wall time of the one that slept

    summary = subprocess.run([sys.executable, str(SCRIPTS / "cpu_per_test.py"), str(out)],
                             capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.startswith("2 tests: ")
    tests = summary.stdout.split("CPU-s  wall-s  test\n")[1].splitlines()
    burns = [line for line in tests if line.endswith("test_sample.py::test_burns")]
    assert len(tests) == 2 and float(burns[0].split()[0]) == round(float(rows[0][0]), 1)
