"""A run's cgroup in a sandbox whose cgroups are v2 only (stdlib; shipped into sandboxes as
``deepgym_remote_cgroup_v2``): a container on a cgroup v2 host, what clouds run today.

In v2 one group holds every controller, and a group hands memory and pids down to groups
below it only while no process is in it itself (the kernel answers EBUSY otherwise). A
container's processes all sit in its own group, so on the sandbox's first run the in-sandbox
program moves them (the cloud's daemon, its shells, the program itself) into a leaf group of
their own and turns memory and pids on below the container's group, as Docker-in-Docker's
entrypoint does; each run's group is then made beside that leaf::

    /sys/fs/cgroup/               the sandbox's group (its cgroup namespace's root)
      deepgym-sandbox/            the sandbox's own processes, moved there once
      deepgym-remote-<run>/       memory.max, memory.swap.max 0, pids.max: all of the run's
        s<pid>-<n>/               solution processes together; the runner's per-process
                                  groups (``deepgym_cgroup.CpuGroup``) below it

A process the cloud later starts in the sandbox's group itself lands in the leaf: runc's
``exec`` joins the cgroup of the container's init when its own answers EBUSY (runc #2416).

Cleanup: ``cgroup.kill`` (Linux 5.14) kills the run's group and every group below it at once,
however its processes fork (on an older kernel, its members are killed until none is listed,
the run's ``pids.max`` bounding the rounds). An empty ``cgroup.procs`` everywhere proves them
gone.

Example (in the sandbox, as root):
    run = create("r1", memory_bytes=1 << 30, pids=64, prefix="deepgym-remote-")
    run.procs_files()          # ['/sys/fs/cgroup/deepgym-remote-r1/cgroup.procs']
    run.kill_all() and run.remove()
"""

import errno
import os
import signal
import time
from pathlib import Path

try:  # in a sandbox, beside the local provider's module (see ``command.judge_files``)
    from deepgym_remote_cgroups import RunCgroup, _read, _write
except ImportError:  # on the host
    from deepgym_ray.sandboxes.local.cgroups import RunCgroup, _read, _write

ROOT = "/sys/fs/cgroup"
LEAF = "deepgym-sandbox"
NEEDED = ("memory", "pids")
KILL_WAIT = 10.0
MOVE_ROUNDS = 50  # a process forked while its parent moves is moved in the next round


def _own_group(root):
    """This process's group in the v2 hierarchy mounted on ``root`` (OSError if none)."""
    if not os.path.isfile(os.path.join(root, "cgroup.controllers")):
        raise OSError(f"no cgroup v2 hierarchy on {root}")
    with open("/proc/self/cgroup", encoding="ascii") as f:
        for line in f:
            if line.startswith("0::"):
                group = os.path.join(root, line[3:].strip().lstrip("/"))
                if os.path.isdir(group):
                    return os.path.normpath(group)
                raise OSError(f"this sandbox's cgroup {line[3:].strip()} is not under {root}"
                              " (no cgroup namespace of its own)")
    raise OSError("this process is in no cgroup v2 group")


def domain(root=ROOT):
    """The group the runs' groups are made in: the sandbox's (this process's, or the parent
    of the leaf it was moved to)."""
    group = _own_group(root)
    return os.path.dirname(group) if os.path.basename(group) == LEAF else group


def delegate(group):
    """Turn memory and pids on below ``group``, moving its own processes into the leaf
    first where it has any; OSError saying why where the sandbox does not allow it."""
    enabled = _read(os.path.join(group, "cgroup.subtree_control")).split()
    if all(c.encode() in enabled for c in NEEDED):
        return
    offered = _read(os.path.join(group, "cgroup.controllers")).decode().split()
    lacking = [c for c in NEEDED if c not in offered]
    if lacking:
        raise OSError(f"cgroup v2 here offers {' '.join(offered) or 'no controller'}, "
                      f"not {' '.join(lacking)}")
    wanted = " ".join(f"+{c}" for c in NEEDED)
    for _ in range(MOVE_ROUNDS):
        try:
            _write(os.path.join(group, "cgroup.subtree_control"), wanted)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
        _move_into_leaf(group)
    raise OSError(f"processes kept appearing in {group}: its controllers cannot be delegated")


def _move_into_leaf(group):
    leaf = os.path.join(group, LEAF)
    os.makedirs(leaf, exist_ok=True)
    for pid in _read(os.path.join(group, "cgroup.procs")).split():
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid.decode())
        except ProcessLookupError:
            pass  # it ended meanwhile


def create(name, *, memory_bytes, pids, prefix, root=ROOT):
    """The run's group with its limits (OSError saying why it cannot be had; nothing is
    left then)."""
    parent = domain(root)
    delegate(parent)
    path = os.path.join(parent, prefix + name)
    os.mkdir(path, 0o755)
    run = RunCgroupV2({"v2": Path(path)})
    try:
        _write(os.path.join(path, "memory.max"), str(int(memory_bytes)))
        if os.path.exists(os.path.join(path, "memory.swap.max")):  # swap accounted: none
            _write(os.path.join(path, "memory.swap.max"), "0")
        _write(os.path.join(path, "pids.max"), str(int(pids)))
    except OSError:
        run.remove()
        raise
    return run


class RunCgroupV2(RunCgroup):
    """One run's v2 group (``groups = {"v2": path}``); ``procs_files``, ``pids`` and
    ``remove`` are v1's (one group instead of one per controller)."""

    def kill_all(self):
        """Kill every process of the run; True once none is left in its groups."""
        if not self.pids():
            return True
        try:  # all of them at once, a fork in between too (Linux 5.14)
            _write(self.groups["v2"] / "cgroup.kill", "1")
        except OSError:
            pass  # an older kernel: the loop below kills what is listed until none is left
        deadline = time.monotonic() + KILL_WAIT
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)

    def memory_failures(self):
        """How often the run's memory reached its limit (``memory.events``' ``max``)."""
        try:
            for line in _read(self.groups["v2"] / "memory.events").splitlines():
                key, _, value = line.partition(b" ")
                if key == b"max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0
