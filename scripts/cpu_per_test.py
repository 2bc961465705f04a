"""A pytest plugin that records the whole machine's CPU time spent during each test, for
finding where the suite's CPU goes (the suite is CPU-bound on two cores: its time is its CPU).

Run the tests in one process (``-n 0``) on an otherwise idle machine, so that what the machine
spent during a test is that test's: its Ray actors, sandboxes, containers and test servers
included, which a per-process measurement would miss. Each test's line is appended to
``$CPU_PER_TEST_OUT`` (default ``cpu_per_test.tsv``); the summary prints the costliest.

Example::

    PYTHONPATH=scripts .venv/bin/python -m pytest -n 0 -p cpu_per_test tests/sandboxes
    .venv/bin/python scripts/cpu_per_test.py cpu_per_test.tsv      # the summary
"""

from __future__ import annotations

import collections
import os
import sys
import time

import pytest


def machine_cpu_seconds() -> float:
    """CPU time the machine has spent busy (all cores, user and system), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = machine_cpu_seconds(), time.monotonic()
    yield
    cpu, wall = machine_cpu_seconds() - cpu, time.monotonic() - wall
    with open(os.environ.get("CPU_PER_TEST_OUT", "cpu_per_test.tsv"), "a") as f:
        f.write(f"{cpu:.2f}\t{wall:.2f}\t{item.nodeid}\n")


def summary(path: str, top: int = 25) -> None:
    """Print the total, the costliest files and the costliest tests of a recording."""
    rows = []
    with open(path) as f:
        for line in f:
            cpu, wall, nodeid = line.rstrip("\n").split("\t", 2)
            rows.append((float(cpu), float(wall), nodeid))
    print(f"{len(rows)} tests: {sum(r[0] for r in rows):.1f} CPU-s "
          f"in {sum(r[1] for r in rows):.1f} s")
    files: collections.Counter[str] = collections.Counter()
    for cpu, _, nodeid in rows:
        files[nodeid.split("::")[0]] += cpu
    print("\nCPU-s  file")
    for name, cpu in files.most_common(top):
        print(f"{cpu:6.1f}  {name}")
    print("\nCPU-s  wall-s  test")
    for cpu, wall, nodeid in sorted(rows, reverse=True)[:top]:
        print(f"{cpu:6.1f}  {wall:6.1f}  {nodeid}")


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else "cpu_per_test.tsv")
