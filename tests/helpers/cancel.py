"""For the tests of giving up on a map: runs that would take minutes on the real local provider,
a provider that logs every run it makes (from inside a Ray actor), and the search for what of a
map is still running below an actor.

``LoggedProvider`` is the real local provider; each ``create`` appends the run's uid, work
directories and cgroups to a JSON-lines file, which the test reads to check the runs' cleanup
(``local_sandbox.leftovers``). The module registers itself (and ``local_sandbox``) with Ray's
cloudpickle by value, so actors need no path to it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from deepgym_ray.judge.deepgym_proc import kill_uid, uid_processes
from deepgym_ray.models import Environment
from helpers import local_sandbox
from helpers.local_sandbox import RecordingProvider

try:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(local_sandbox)
except ImportError:  # pragma: no cover
    pass

# A run whose solution's one call would take ten minutes (the run's limits allow it).
SLEEPER = Environment(
    name="sleeper", timeout=600, case_timeout=600,
    verifier_code="from deepgym_solution import load_solution\n"
                  "def verify(solution_path, test_cases_path=None):\n"
                  "    load_solution(solution_path).wait()\n"
                  "    return 1.0\n")
SLEEPING_SOLUTION = "import time\ndef wait():\n    time.sleep(600)\n"
QUICK = Environment(name="quick", verifier_code="return 1.0")
FIRST_UID = 1 << 20  # the local provider's run uids start here (see LocalProvider.create)


def gated(gate: Path) -> Environment:
    """A run that passes once the file ``gate`` exists (its verifier runs on the host)."""
    return Environment(
        name="gated", timeout=300, env_vars={"DEEPGYM_TEST_GATE": str(gate)},
        verifier_code="import os, time\n"
                      "def verify(solution_path, test_cases_path=None):\n"
                      "    deadline = time.monotonic() + 280\n"
                      "    while not os.path.exists(os.environ['DEEPGYM_TEST_GATE']):\n"
                      "        if time.monotonic() > deadline:\n"
                      "            return 0.0\n"
                      "        time.sleep(0.01)\n"
                      "    return 1.0\n")


class LoggedProvider(RecordingProvider):
    """The local provider, logging each run's uid, directories and cgroups to ``log``."""

    def __init__(self, log: str) -> None:
        super().__init__()
        self.log = log

    def create(self, env):
        sandbox = super().create(env)
        record = {k: [str(x) for x in v] if isinstance(v, list) else v
                  for k, v in self.runs[-1].items()}
        with open(self.log, "a") as out:
            out.write(json.dumps(record) + "\n")
        return sandbox


class LoggedFactory:
    """A picklable factory of LoggedProvider (a client builds its provider in each actor)."""

    def __init__(self, log: Path) -> None:
        self.log = str(log)

    def __call__(self) -> LoggedProvider:
        return LoggedProvider(self.log)


class RunLog:
    """The runs a LoggedProvider made, as the test reads them."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def runs(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def uids(self) -> list[int]:
        return [run["uid"] for run in self.runs if run["uid"] is not None]


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, real uid) of every process now."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            table[int(entry)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]))
        except (OSError, KeyError, ValueError):
            continue
    return table


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def run_processes(actor_pids: list[int], solutions_only: bool = False) -> list[int]:
    """Processes of runs below these actors: what the runner fork server forked (monitors and
    runners, with all they started) and every process under a run's uid (``solutions_only``:
    those alone). The actors' warm helpers themselves (the fork server, the solution zygote)
    are not runs."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)

    def below(root: int) -> list[int]:
        found, todo = [], list(children.get(root, []))
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    out: set[int] = set()
    for actor in actor_pids:
        for pid in below(actor):
            if table[pid][1] >= FIRST_UID:
                out.add(pid)
            if solutions_only:
                continue
            if table[pid][0] == actor and b"deepgym_forkserver.py" in _cmdline(pid):
                out.update(below(pid))
    return sorted(out)


def wait_until(condition, what: str, limit: float = 120.0, poll: float = 0.05) -> None:
    """Poll ``condition`` (an event: processes up, an actor idle) until it holds."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"not within {limit:.0f}s: {what}"
        time.sleep(poll)


def solutions_running(uids: list[int]) -> int:
    """How many of these run uids have a live process now."""
    return sum(1 for uid in uids if uid_processes(uid))


def end_runs_of(uids: list[int]) -> None:
    """After a test: kill whatever of these runs' solutions is left (an actor killed by a
    pool's shutdown never cleans up after its runs), so a failed test leaves nothing behind."""
    for uid in uids:
        kill_uid(uid, rounds=20, wait_for_zombies=False)
