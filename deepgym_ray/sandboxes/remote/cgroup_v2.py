"""A run's cgroup in a sandbox whose cgroups are v2 only (stdlib; shipped into sandboxes as
``deepgym_remote_cgroup_v2``): a container or a microVM on a cgroup v2 host, what clouds run.

In v2 one group holds every controller, and a group hands memory and pids down to the groups
below it only while no process is in it itself (the kernel answers EBUSY otherwise; the root
group excepted). A run's group goes where it can have them without changing a group that
the cloud puts processes in:

- below the nearest of this process's group and its ancestors that hands memory and pids down
  already: an E2B microVM's root, for instance, whose daemon (envd) starts each command in a
  group of its own (``/user``) with ``CLONE_INTO_CGROUP``; turning controllers on in that
  group would make the kernel refuse envd's next command (EBUSY), so it is never touched;
- else below the top of the sandbox's hierarchy, once memory and pids are turned on there. In
  a container (Daytona's) that top is the container's own group, holding all its processes: on
  the sandbox's first run they (the cloud's daemon, its shells, this program) are moved into a
  leaf group of their own, as Docker-in-Docker's entrypoint does, and a process the cloud later
  starts in the container's group lands in the leaf (runc's ``exec`` joins the group of the
  container's init when its own answers EBUSY: runc #2416)::

    /sys/fs/cgroup/               the top (a container's group: its cgroup namespace's root)
      deepgym-sandbox/            the top's own processes, moved there once
      deepgym-remote-<run>/       memory.max, memory.swap.max 0, pids.max: all of the run's
        s<pid>-<n>/               solution processes together; the runner's per-process
                                  groups (``deepgym_cgroup.CpuGroup``) below it

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
from pathlib import Path

try:  # in a sandbox, beside the local provider's module (see ``command.judge_files``)
    from deepgym_remote_cgroups import RunCgroup, _read, _write
except ImportError:  # on the host
    from deepgym_ray.sandboxes.local.cgroups import RunCgroup, _read, _write

ROOT = "/sys/fs/cgroup"
LEAF = "deepgym-sandbox"
NEEDED = ("memory", "pids")
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
    """Where the runs' groups are made, and whether memory and pids are on there already:
    the nearest of this process's group and its ancestors that hands them down, else the top
    of the hierarchy (not yet)."""
    group, top = _own_group(root), os.path.normpath(root)
    while True:
        enabled = _read(os.path.join(group, "cgroup.subtree_control")).split()
        if all(c.encode() in enabled for c in NEEDED):
            return group, True
        if group == top:
            return top, False
        group = os.path.dirname(group)


def delegate(group):
    """Turn memory and pids on below ``group`` (the top), moving its own processes into the
    leaf first where it has any; OSError saying why where the sandbox does not allow it."""
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
    parent, ready = domain(root)
    if not ready:
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
    """One run's v2 group (``groups = {"v2": path}``); ``procs_files``, ``pids``, ``remove``
    and the kill loop are v1's (one group instead of one per controller, no freezer)."""

    def kill_all(self):
        """Kill every process of the run; True once none is left in its groups."""
        if self.pids():
            try:  # all of them at once, a fork in between too (Linux 5.14)
                _write(self.groups["v2"] / "cgroup.kill", "1")
            except OSError:
                pass  # an older kernel: v1's loop below kills what is listed until none is
        return super().kill_all()  # no freezer here: kill what is listed until none is

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
