"""When a request to the solution process is over (stdlib only): the solution's clocks and the
limits of one request.

A request's limit is counted in the CPU time of the solution process *and every process it
started*, in one of three ways (:class:`CpuGroup`, :class:`CpuClock`):

- where the provider gives the run a CPU-accounting cgroup (``cpuacct.usage`` in cgroup v1,
  ``cpu.stat``'s ``usage_usec`` in v2; the local and Daytona providers), each solution process
  gets a group of its own below it, which it and its descendants cannot leave (that takes write
  access to the cgroup tree, which only root has): CPU burnt in an orphaned, double-forked
  grandchild counts whether it is ever reaped or not, and killing the process empties its
  group, orphans included;
- where the sandbox holds one run and its cgroup is readable but not writable (Docker:
  ``launch["cpu_whole"]``), a request's CPU is the whole sandbox's less the runner's own: every
  process of the run counts while the request runs, a concurrent solution process of the same
  run included; CPU spent between requests is charged only while the run has had no other
  solution process since (else it could be another's);
- elsewhere, ``/proc/<pid>/stat`` (``utime + stime`` and reaped children's): CPU of
  descendants the solution process never reaps (orphans) is then not counted.

The CPU of a request is what the solution used since its previous reply (in the whole sandbox:
as said above), so work done between requests (a background thread or process computing while
the verifier is busy) is charged to the next one; it is read once more when the reply arrives,
so work spread over several CPUs cannot finish inside the wall-clock limit with more CPU than
allowed. A neighbour's load does not turn a right answer into a timeout: an answer that waits
without computing (sleeps, blocks, stops itself) is ended by a wall-clock bound of
:data:`WALL_FACTOR` times the limit, from which the time the solution spent ready to run but
waiting for a CPU (``/proc/<pid>/schedstat``) is left out: it is the machine's load, not the
answer's doing. However starved, no request outlasts a
third of what is left of the run's own time limit (the runner's interval timer), so an answer
that keeps timing out fails its cases instead of the whole run. A reply already waiting when a
limit is checked counts as in time if its CPU time is within the limit: a verifier that was
itself starved and looked late does not fail it. Where the CPU time cannot be read at all, the
limit is wall-clock.

Example:
    deadline = Deadline(CpuClock(proc.pid, group), 0.5, TimeoutError)
    proc.stdin.write(request)
    deadline.start()
    read_exact(proc.stdout.fileno(), size, deadline.wait)   # TimeoutError past a limit
"""

import os
import select
import signal
import time

__all__ = ["STARVED_FACTOR", "WALL_FACTOR", "CpuClock", "CpuGroup", "Deadline"]

WALL_FACTOR = 10  # wall-clock bound of a request, in multiples of its (CPU) limit
STARVED_FACTOR = 100  # with no run timer, the most wall-clock time a request may take, ditto
_POLL = 0.1  # seconds between readings once a request has run its limit in wall time
_TICK = os.sysconf("SC_CLK_TCK")
_V1, _V2 = "cpuacct.usage", "cpu.stat"  # a group's CPU in ns (v1), usage_usec line (v2)
_MADE = [0]  # groups this process made (their names must not repeat)


def _accounts(directory, versions=(_V1, _V2)):
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
                if _accounts(parent, (version,)) is None:
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
            if _accounts(path) is not None:
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
                return self._reaped(seen, deadline)
            if time.monotonic() > deadline:
                return False
            seen.update(pids)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.001)

    @staticmethod
    def _reaped(pids, deadline):
        """Wait (to ``deadline``) until the killed ``pids`` are reaped, not just dead: an
        orphan's zombie waits for the sandbox's init, and until then it still answers a
        signal as if alive."""
        for pid in pids:
            while os.path.exists(f"/proc/{pid}"):
                if time.monotonic() > deadline:
                    return True  # dead all the same: the group is empty
                time.sleep(0.001)
        return True

    def remove(self):
        """Remove the group (once empty; the provider removes what is left with the run's)."""
        if self.whole:
            return
        try:
            os.rmdir(self.path)
        except OSError:
            pass


class CpuClock:
    """CPU seconds used by one solution process: by its :class:`CpuGroup` (``group``: every
    process it started; the sandbox's whole group less this process's own CPU) or else by the
    process and its reaped children (``/proc/<pid>/stat``); and the seconds its main thread
    waited for a CPU (``/proc/<pid>/schedstat``). ``mark`` is the reading at the end of the
    last request: what ran since counts for the next, where it is surely this process's
    (:meth:`carries`)."""

    def __init__(self, pid, group=None):
        self.fds = {}
        self.mark = self.census = None
        self.v2 = False
        self.whole = group is not None and group.whole
        self.group = group
        names = ("stat", "schedstat") if pid is not None else ()
        for name in names:
            try:
                self.fds[name] = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                pass
        counter = _accounts(group.path) if group is not None else None
        if counter is not None:
            try:
                self.fds["group"] = os.open(counter, os.O_RDONLY | os.O_CLOEXEC)
                self.v2 = counter.endswith(_V2)
            except OSError:
                pass

    def read(self):
        """CPU seconds, or None when they cannot be read (the process is gone, no /proc)."""
        try:
            fd = self.fds.get("group")
            if fd is not None:  # one pread of the group's counter: every process it holds
                data = os.pread(fd, 64, 0)
                used = int(data.split(None, 2)[1]) / 1e6 if self.v2 else int(data) / 1e9
                if self.whole:  # less the runner's own (verifier threads, reaped children)
                    own = os.times()
                    used -= own[0] + own[1] + own[2] + own[3]
                return used
            data = os.pread(self.fds["stat"], 2048, 0)
            fields = data[data.rindex(b")") + 2:].split()
            # utime + stime + cutime + cstime, in clock ticks
            return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / _TICK
        except (KeyError, OSError, ValueError, IndexError):
            return None

    def set_mark(self, used):
        self.mark = used
        if self.whole and self.group.census is not None:
            self.census = self.group.census()

    def carries(self):
        """Whether what ran since :attr:`mark` was this process's (and what it started): in
        the whole sandbox only while no other solution process ran meanwhile."""
        if self.mark is None or not self.whole:
            return self.mark is not None
        census = self.group.census() if self.group.census is not None else None
        return census is not None and census == self.census and census[1] == 1

    def queued(self):
        """Seconds spent runnable but not running, or None when they cannot be read."""
        try:
            return int(os.pread(self.fds["schedstat"], 128, 0).split()[1]) / 1e9
        except (KeyError, OSError, ValueError, IndexError):
            return None

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def _bounds(limit):
    """A request's two wall-clock bounds: on its time not spent waiting for a CPU, and on all
    of it (a third of the run's time left; with no run timer, STARVED_FACTOR limits)."""
    try:
        run_left = signal.getitimer(signal.ITIMER_REAL)[0]
    except (OSError, ValueError):
        run_left = 0.0
    cap = run_left / 3 if run_left > 0 else STARVED_FACTOR * limit
    return WALL_FACTOR * limit, max(cap, limit)


class Deadline:
    """The limits of one request on ``clock``'s process (None: wall-clock only), from
    :meth:`start` on; :meth:`wait` before each read raises ``timed_out(what)`` past one."""

    def __init__(self, clock, limit, timed_out):
        self.clock, self.limit, self.timed_out = clock, limit, timed_out
        # From the end of the previous reply: what ran in between is this request's too (and
        # the clock need not be read again here: one reading per request, as before).
        carried = clock.mark if clock is not None and clock.carries() else None
        self.cpu_start = carried if carried is not None else (
            clock.read() if clock is not None else None)
        self.queued_start = clock.queued() if self.cpu_start is not None else None
        self.started = time.monotonic()
        self.bounds = None  # worked out only for a request that outlasts its limit
        self.checked = False  # the reply's CPU was read (once: the worker sends it in one go)

    def start(self):
        """The request has been sent: its time counts from now."""
        self.started = time.monotonic()

    def wait(self, fd):
        """Return once ``fd`` has data within the limits; raise ``timed_out(...)`` past one."""
        while True:
            elapsed = time.monotonic() - self.started
            left = self.limit - elapsed
            if left <= 0:
                left = self._past_limit(fd, elapsed)
                if left is None:
                    return
            if select.select([fd], [], [], max(left, 0.001))[0]:
                if not self.checked:  # a reply within the wall-clock limit: its CPU too
                    self._used()
                return

    def _used(self):
        """CPU seconds of this request so far (None: unknown); raises past the limit."""
        if self.cpu_start is None:
            return None
        used = self.clock.read()
        self.checked = True
        if used is None:
            return None
        self.clock.set_mark(used)
        used -= self.cpu_start
        if used >= self.limit:
            raise self.timed_out(f"{self.limit:g}s of CPU time")
        return used

    def _past_limit(self, fd, elapsed):
        """None when a reply is waiting within the CPU limit, else how long to wait next."""
        ready = bool(select.select([fd], [], [], 0)[0])  # before the clock: its time is final
        used = self._used()
        if used is None:
            if ready:
                return None
            raise self.timed_out(f"{self.limit:g}s")
        if ready:
            return None
        if self.bounds is None:
            self.bounds = _bounds(self.limit)
        bound, cap = self.bounds
        queued = self.clock.queued()
        waited = queued - self.queued_start if None not in (queued, self.queued_start) else 0.0
        active = elapsed - waited
        if active >= bound:
            raise self.timed_out(f"{bound:g}s of wall-clock time (its waits for a CPU not "
                                 "counted)")
        if elapsed >= cap:
            raise self.timed_out(f"{cap:g}s of wall-clock time in all")
        return min(self.limit - used, bound - active, cap - elapsed, _POLL)
