"""The in-sandbox program where the sandbox's cgroups are v2 only (``remote/cgroup_v2``), in a
real kernel: User-Mode Linux machines (``tests/uml_sandbox``), this machine's own cgroups
being v1. Each machine is a container on a cgroup v2 host (Daytona's), its daemon and a
neighbour process in the sandbox's group, or a microVM whose daemon starts each command in a
group of its own (E2B's); everything of a run is the production code but the cloud's calls.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from uml_sandbox import UmlProvider, missing

from deepgym_ray.client import DeepGym
from deepgym_ray.models import Environment

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

RUN_MEMORY_MB = 128  # all of a run's solution processes together
MAX_PROCESSES = 32

VERIFIER = '''
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    got = load_solution(solution_path).answer()
    return {"score": 1.0 if got == "right" else 0.0, "passed": got == "right",
            "details": repr(got)[:300]}
'''
ENV = Environment(name="cgroup-v2", verifier_code=VERIFIER, timeout=20)
RIGHT = 'def answer():\n    return "right"\n'

# Where the solution process sits, and the bounds of the run's group above it.
WHERE = '''
def answer():
    group = open("/proc/self/cgroup").read().strip().split("::", 1)[1]
    run = "/sys/fs/cgroup" + group.rsplit("/", 1)[0]
    return "|".join([group, open(run + "/memory.max").read().strip(),
                     open(run + "/pids.max").read().strip()])
'''
# Four children of 40 MB each, every one well within the per-process limit (the run's
# memory), 160 MB together: "right" only if all four held theirs at one moment.
FOUR_CHILDREN = '''
import os, time
def answer():
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            block = bytearray(40 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(1)
            os._exit(0)
        kids.append(pid)
    held = sum(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0
               for s in (os.waitpid(pid, 0)[1] for pid in kids))
    return "right" if held == 4 else f"{held} of 4 held"
'''
# A double-forked survivor in a session of its own, and as many sleeping children as it can.
LEAVES_PROCESSES = '''
import os, time
def answer():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                time.sleep(0.05)
        os._exit(0)
    started = 0
    try:
        for _ in range(100):
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
            started += 1
    except OSError:
        pass
    return f"started {started}"
'''


@pytest.fixture(scope="module")
def uml():
    provider = UmlProvider(solution_memory_mb=RUN_MEMORY_MB, max_processes=MAX_PROCESSES)
    client = DeepGym(mode="local", backend="threads", provider=provider)
    yield client, provider
    provider.close()
    assert not any(machine.alive() for machine in provider.machines)


def _in_machine(provider: UmlProvider, command: str) -> str:
    (machine,) = provider.machines  # one machine, reused by every run
    done = machine.exec(command)
    assert done["code"] == 0, done
    return done["stdout"]


def test_a_run_is_held_by_a_group_of_its_own_under_the_runs_bounds(uml):
    client, provider = uml
    result = client.run(ENV, WHERE)
    group, memory, pids = result.details.strip("'").split("|")
    assert re.fullmatch(r"/deepgym-remote-[0-9a-f]+/s\d+-\d+", group), result.details
    assert (memory, pids) == (str(RUN_MEMORY_MB << 20), str(MAX_PROCESSES))
    held = json.loads(_in_machine(provider, "cat /root/deepgym/judge/.deepgym-confinement.json"))
    assert held["cgroups"] is True and held["why"] == {}
    # The sandbox's own processes moved into a leaf (the daemon, the neighbour), and memory
    # and pids turned on below the sandbox's group.
    (machine,) = provider.machines
    leaf = _in_machine(provider, "cat /sys/fs/cgroup/deepgym-sandbox/cgroup.procs").split()
    assert str(machine.neighbour) in leaf
    assert _in_machine(provider, "cat /sys/fs/cgroup/cgroup.procs") == ""
    assert _in_machine(provider, "cat /sys/fs/cgroup/cgroup.subtree_control").split() == [
        "memory", "pids"]
    assert client.run(ENV, RIGHT).score == 1.0


def test_four_children_each_within_its_limit_are_bounded_together(uml):
    client, _ = uml
    result = client.run(ENV, FOUR_CHILDREN)
    assert result.has_verdict and result.score == 0.0, result.details
    assert "of 4 held" in result.details
    assert client.run(ENV, RIGHT).score == 1.0


def test_what_a_run_leaves_running_is_killed_and_the_sandbox_kept(uml):
    client, provider = uml
    result = client.run(ENV, LEAVES_PROCESSES)
    assert result.has_verdict and result.score == 0.0
    started = int(result.details.strip("'").split()[1])
    assert started < MAX_PROCESSES  # the run's pids.max (with the survivor and the solution)
    # Nothing of the run's uid is left, nor its group; the sandbox's own processes live on.
    (machine,) = provider.machines
    uids = set(_in_machine(provider, "ps -e -o uid=").split())
    assert uids == {"0"}
    groups = _in_machine(provider, "ls /sys/fs/cgroup").split()
    assert not [g for g in groups if g.startswith("deepgym-remote-")]
    _in_machine(provider, f"kill -0 {machine.neighbour}")
    assert client.run(ENV, RIGHT).score == 1.0
    assert len(provider.machines) == 1  # the same sandbox, proven clean, served every run


def test_a_sandbox_given_no_memory_controller_runs_on_and_says_why(caplog):
    provider = UmlProvider(controllers=("pids",), solution_memory_mb=RUN_MEMORY_MB,
                           max_processes=MAX_PROCESSES)
    client = DeepGym(mode="local", backend="threads", provider=provider)
    try:
        with caplog.at_level(logging.WARNING):
            assert client.run(ENV, RIGHT).score == 1.0
        held = json.loads(_in_machine(provider,
                                      "cat /root/deepgym/judge/.deepgym-confinement.json"))
        assert held["cgroups"] is False
        assert "cgroup v2 here offers pids, not memory" in held["why"]["cgroups"]
        warned = [r.getMessage() for r in caplog.records if "no per-run cgroups" in r.getMessage()]
        assert warned and "not memory" in warned[0]
        # Nothing was moved where nothing could be gained.
        (machine,) = provider.machines
        assert str(machine.neighbour) in _in_machine(provider,
                                                     "cat /sys/fs/cgroup/cgroup.procs").split()
    finally:
        provider.close()
    assert not provider.machines[0].alive()


def test_a_group_the_cloud_starts_commands_in_is_left_alone():
    """E2B's daemon (envd) starts every command in a group of its own, ``/user``, in a
    microVM whose root hands memory and pids down: a run's group goes below the root, and
    ``/user`` is never changed (with controllers turned on below it, the kernel would refuse
    the daemon's next command)."""
    provider = UmlProvider(layout="vm", solution_memory_mb=RUN_MEMORY_MB,
                           max_processes=MAX_PROCESSES)
    client = DeepGym(mode="local", backend="threads", provider=provider)
    try:
        result = client.run(ENV, WHERE)
        group, memory, pids = result.details.strip("'").split("|")
        assert re.fullmatch(r"/deepgym-remote-[0-9a-f]+/s\d+-\d+", group), result.details
        assert (memory, pids) == (str(RUN_MEMORY_MB << 20), str(MAX_PROCESSES))
        assert _in_machine(provider, "cat /sys/fs/cgroup/user/cgroup.subtree_control") == ""
        assert _in_machine(provider, "cat /proc/self/cgroup") == "0::/user\n"
        assert "deepgym-sandbox" not in _in_machine(provider, "ls /sys/fs/cgroup").split()
        assert client.run(ENV, RIGHT).score == 1.0
    finally:
        provider.close()
    assert not provider.machines[0].alive()
