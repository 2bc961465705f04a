"""The janitor kills a killed process's runs: every process in its run cgroups, and every
process of the run uids it was given (runs without cgroups) and not told to forget.

A helper process plays the provider: it makes a run group, starts a spinning process in it
and one as each of two uids, hands all but the second uid to its janitor, and is killed with
SIGKILL, when no clean-up of its own can run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepgym_ray.sandboxes.local.cgroups import RunCgroup, RunCgroups

PREFIX = "deepgym-janitor-test-"  # not the provider's: no provider's sweep touches it

PROVIDER = textwrap.dedent("""
    import json, os, secrets, subprocess, sys
    from deepgym_ray.sandboxes.local import janitor
    from deepgym_ray.sandboxes.local.cgroups import RunCgroup, RunCgroups

    groups = RunCgroups.probe(prefix=sys.argv[1])
    run = groups.create("run", memory_bytes=1 << 30, pids=64)
    spin = ["/bin/sh", "-c", "while :; do :; done"]  # reachable by any uid
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
             "start_new_session": True}

    def joined():
        for procs in run.procs_files():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

    def as_uid(uid):
        def drop():
            os.setgid(uid)
            os.setuid(uid)
        return drop

    in_group = subprocess.Popen(spin, preexec_fn=joined, **quiet)
    uids = [(1 << 20) + secrets.randbelow(1 << 29) for _ in range(2)]
    by_uid = [subprocess.Popen(spin, preexec_fn=as_uid(u), **quiet) for u in uids]
    janitor.kill_groups_at_exit(f"{sys.argv[1]}{os.getpid()}-", groups.parents.values())
    janitor.kill_uid_at_exit(uids[0])
    janitor.kill_uid_at_exit(uids[1])
    janitor.forget_uid(uids[1])  # its run is over: the janitor must leave it alone
    print(json.dumps({"groups": [str(g) for g in run.groups.values()],
                      "in_group": in_group.pid, "by_uid": [p.pid for p in by_uid]}), flush=True)
    sys.stdin.read()
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_process_runs_die_with_it():
    if os.geteuid() != 0 or not RunCgroups.probe(prefix=PREFIX).available:
        pytest.skip("run cgroups and uids need root and cgroups")
    provider = subprocess.Popen([sys.executable, "-c", PROVIDER, PREFIX], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    line = provider.stdout.readline()
    if not line:
        provider.kill()
    made = json.loads(line)
    forgotten = made["by_uid"][1]
    try:
        doomed = [made["in_group"], made["by_uid"][0]]
        assert all(_alive(pid) for pid in [*doomed, forgotten])
        provider.send_signal(signal.SIGKILL)
        provider.wait(30)
        deadline = time.monotonic() + 30  # a guard against a hang, not a measure of speed
        while time.monotonic() < deadline and (
                any(map(_alive, doomed)) or any(map(os.path.isdir, made["groups"]))):
            time.sleep(0.05)
        assert not [pid for pid in doomed if _alive(pid)]
        assert not [group for group in made["groups"] if os.path.isdir(group)]
        assert _alive(forgotten), "the janitor killed a uid it was told to forget"
    finally:
        for pid in (forgotten, made["in_group"], made["by_uid"][0]):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        RunCgroup({str(i): Path(g) for i, g in enumerate(made["groups"])}).remove()
