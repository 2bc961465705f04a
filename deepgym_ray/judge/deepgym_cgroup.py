"""A solution process's own cgroup (stdlib only): where its CPU is counted and how it and
every process it started are killed together (``deepgym_clock`` reads the count).

Where the provider gives the run a CPU-accounting cgroup (``cpuacct.usage`` in cgroup v1,
``cpu.stat``'s ``usage_usec`` in v2), each solution process gets a group of its own below it,
which it and its descendants cannot leave (that takes write access to the cgroup tree, which
only root has): CPU burnt in an orphaned, double-forked grandchild counts whether it is ever
reaped or not, and killing the group kills orphans too. Where the sandbox holds one run and its
group is readable but not writable (Docker), the sandbox's group is used whole, never killed.

Example:
    cgroups, group = CpuGroup.split(launch["cgroups"], launch.get("cpu_whole"))
    ...                     # the solution process joins ``cgroups``
    group.kill(); group.remove()
"""

import os
import signal
import time

from deepgym_proc import wait_reaped

__all__ = ["V2_COUNTER", "CpuGroup", "accounts"]

_V1, _V2 = "cpuacct.usage", "cpu.stat"  # a group's CPU in ns (v1), usage_usec line (v2)
V2_COUNTER = _V2
_MADE = [0]  # groups this process made (their names must not repeat)


def accounts(directory, versions=(_V1, _V2)):
    """The file in which the cgroup ``directory`` counts its CPU, or None."""
    for name in versions:
        path = os.path.join(directory, name)
        if name == _V1:
            if os.path.isfile(path):
                return path
            continue
        try:  # v1's cpu controller has a cpu.stat too, without usage_usec
            with open(path, "rb") as f:
                if f.read(11) == b"usage_usec ":
                    return path
        except OSError:
            pass
    return None


class CpuGroup:
    """One solution process's own cgroup, below the run's CPU-accounting group: it and every
    process it starts are counted (:class:`CpuClock`) and killed (:meth:`kill`) together.
    ``whole``: the sandbox's own group instead, read-only and shared with the runner (its CPU
    is left out of the count), never killed."""

    def __init__(self, path, whole=False):
        self.path, self.whole = path, whole
        self.procs = os.path.join(path, "cgroup.procs")
        # For a whole group: () -> (solution processes started, live ones) in the run.
        self.census = None

    @classmethod
    def split(cls, procs_files, whole=()):
        """``(files, group)`` for the run's ``cgroup.procs`` files: the run's CPU-accounting
        group is replaced by a new group of its own below it. Where there is none (or it cannot
        be made: then the process joins the run's groups as they are), the first of the
        sandbox's groups ``whole`` that counts CPU, or None."""
        files = list(procs_files or ())
        for version in (_V1, _V2):  # v1's file first (a stat each); v2's read only if none
            for at, procs in enumerate(files):
                parent = os.path.dirname(procs)
                if accounts(parent, (version,)) is None:
                    continue
                _MADE[0] += 1
                path = os.path.join(parent, f"s{os.getpid()}-{_MADE[0]}")
                try:
                    os.mkdir(path, 0o755)  # root's, like the run's: the solution cannot write it
                except OSError:
                    return files, None
                group = cls(path)
                files[at] = group.procs
                return files, group
        for path in whole or ():
            if accounts(path) is not None:
                return files, cls(path, whole=True)
        return files, None

    def members(self):
        try:
            with open(self.procs, "rb") as f:
                return [int(pid) for pid in f.read().split()]
        except (OSError, ValueError):
            return []

    def kill(self, wait=5.0):
        """SIGKILL every process in the group until none is left; True once empty (at most
        ``wait`` seconds). cgroup v2's ``cgroup.kill`` does it at once; in v1 the members are
        listed and killed until the list is empty (a fork in between is caught by the next
        round, and the run's process limit bounds the rounds); then until they are reaped.
        Never for a ``whole`` group."""
        if self.whole:
            return False
        seen = set(self.members())
        try:
            fd = os.open(os.path.join(self.path, "cgroup.kill"), os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)
        except OSError:
            pass
        deadline = time.monotonic() + wait
        while True:
            pids = self.members()
            if not pids:
                wait_reaped(seen, deadline)
                return True  # dead all the same: the group is empty
            if time.monotonic() > deadline:
                return False
            seen.update(pids)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.001)

    def remove(self):
        """Remove the group (once empty; the provider removes what is left with the run's)."""
        if self.whole:
            return
        try:
            os.rmdir(self.path)
        except OSError:
            pass
