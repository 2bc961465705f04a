"""Kill the runs of a process, and detach and remove its mounts, once it is gone, however it went.

The local provider mounts tmpfs file systems as root (the runners' work root, the solutions'
shared root with each run's tmpfs under it), and its runs' solution processes live in their own
sessions, as their own uids, in the warm zygote's PID namespace (whose bwrap init waits for
every process in it, so the zygote's exit takes none of them along). A mount outlives the
process that made it, and so does a solution process; a Ray worker is often ended by SIGKILL,
when no clean-up of its own can run. So the provider starts this script once (see
``janitor.py`` beside it) as ``python -I -S -B deepgym_janitor.py FD PID``: it leaves its
parent's (PID's) process tree at once (a worker's exit kills the worker's children, never a
grandchild that moved away), then reads lines on the pipe FD:

- ``/a/path``: a mount point (or a directory holding some) to release;
- ``cgroups\\t<name prefix>\\t<parent>...``: the run cgroups the provider makes are
  ``<parent>/<name prefix>*`` (one parent per controller);
- ``uid\\t<n>`` / ``-uid\\t<n>``: a run without cgroups runs as uid n (or no longer does).

When the pipe ends (the provider's process exited or was killed) it first kills every process
in those groups (v2: ``cgroup.kill``; v1: freeze, SIGKILL each member, thaw, until the kernel
lists none, as the provider's own cleanup does) and removes the groups, kills every process
of those uids, then detaches every mount at or under the paths, deepest first, and removes
them. Standard library only: it starts in milliseconds.
"""

import ctypes
import os
import shutil
import signal
import sys
import time

MNT_DETACH = 2
KILL_WAIT = 10.0  # seconds for a run's processes to be gone before giving up on them


def mounts_under(*paths):
    """Mount points at or under any of ``paths`` (deepest first), from one read of
    /proc/self/mountinfo (the host's code imports this too)."""
    roots = [os.path.realpath(path).rstrip("/") for path in paths]
    found = []
    try:
        with open("/proc/self/mountinfo") as table:
            lines = table.read().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")  # \040 for a space, etc.
            if any(point == root or point.startswith(root + "/") for root in roots):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def release(paths):
    """Detach what is mounted at or under ``paths`` (three rounds at most), then remove them."""
    libc = ctypes.CDLL(None, use_errno=True)  # find_library("c") would run ldconfig
    for _ in range(3):
        points = mounts_under(*paths)
        if not points:
            break
        for point in points:
            libc.umount2(os.fsencode(point), MNT_DETACH)
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)  # fd-based: no symlink leads it elsewhere


def _write(path, value):
    try:
        with open(path, "w") as handle:
            handle.write(value)
        return True
    except OSError:
        return False


def _tree(group):
    """``group`` and the groups below it, deepest first (the runner's per-process groups)."""
    found = []
    for top, dirs, _files in os.walk(group):
        found += [os.path.join(top, d) for d in dirs]
    return sorted(found, key=len, reverse=True) + [group]


def _members(groups):
    pids = set()
    for group in groups:
        for inner in _tree(group):
            try:
                with open(os.path.join(inner, "cgroup.procs")) as handle:
                    pids.update(int(pid) for pid in handle.read().split())
            except (OSError, ValueError):
                pass
    return pids


def run_groups(prefix, parents):
    """The groups named ``prefix*`` under any of ``parents``."""
    found = []
    for parent in parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        found += [os.path.join(parent, n) for n in names if n.startswith(prefix)]
    return [g for g in found if os.path.isdir(g)]


def kill_groups(groups):
    """Kill every process in ``groups`` (and below them); True once the kernel lists none.
    Then remove the groups."""
    for group in groups:
        _write(os.path.join(group, "cgroup.kill"), "1")  # v2: the kernel kills the subtree
    freezers = [g for g in groups if os.path.exists(os.path.join(g, "freezer.state"))]
    for group in freezers:  # v1: a frozen process cannot fork, so the list below is complete
        _write(os.path.join(group, "freezer.state"), "FROZEN")
    deadline = time.monotonic() + KILL_WAIT
    while True:
        pids = _members(groups)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for group in freezers:  # a frozen process cannot die
            _write(os.path.join(group, "freezer.state"), "THAWED")
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    for group in groups:
        for inner in _tree(group):
            try:
                os.rmdir(inner)
            except OSError:
                pass
    return not pids


def _uid_of(pid):
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return {int(u) for u in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def kill_uids(uids):
    """SIGKILL every process whose real, effective or saved uid is in ``uids`` until none is
    left (bounded); True when none is."""
    deadline = time.monotonic() + KILL_WAIT
    while True:
        found = [int(p) for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) & uids]
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not found or time.monotonic() > deadline:
            return not found
        time.sleep(0.01)


class Orders:
    """What the provider asked for, from its lines."""

    def __init__(self):
        self.paths, self.cgroups, self.uids = [], [], set()

    def take(self, line):
        fields = line.split("\t")
        if fields[0] == "cgroups" and len(fields) > 2:
            if (fields[1], fields[2:]) not in self.cgroups:  # one per provider made here
                self.cgroups.append((fields[1], fields[2:]))
        elif fields[0] in ("uid", "-uid") and len(fields) == 2 and fields[1].isdigit():
            (self.uids.add if fields[0] == "uid" else self.uids.discard)(int(fields[1]))
        elif line.startswith("/"):
            self.paths.append(line)

    def carry_out(self):
        """Processes first (nothing then runs in a mount being released), then mounts."""
        for prefix, parents in self.cgroups:
            groups = run_groups(prefix, parents)
            if groups:
                kill_groups(groups)
        if self.uids:
            kill_uids(self.uids)
        if self.paths:
            release(self.paths)


def main(fd):
    if os.fork():
        os._exit(0)  # the provider waits for this exit: no zombie, and we are no child of it
    os.setsid()  # nor in its session or process group
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    orders, rest = Orders(), b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:  # taken as they come: a forgotten uid costs no memory
            if line:
                orders.take(line.decode("utf-8", "surrogateescape"))
    orders.carry_out()


if __name__ == "__main__":
    main(int(sys.argv[1]))
