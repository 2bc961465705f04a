"""When a request to the solution process is over (stdlib only): the solution's clocks and the
limits of one request.

A request's limit is counted in the CPU time of the solution process *and every process it
started*, in one of three ways (:class:`CpuClock`; the groups are ``deepgym_cgroup``'s):

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
answer's doing. No request outlasts a third of what is left of the run's own time limit, so an
answer that keeps timing out fails its cases instead of the whole run.

The run's time limit (:class:`RunTimer`, on the runner's interval timer) is counted the same
way: wall-clock time less the time the runner's main thread and the solution processes of its
requests waited for a CPU, so a neighbour's load does not run out a right answer's time either;
however starved, a run ends at a bound on all of its wall-clock time (the host's choice).

A reply already waiting when a limit is checked counts as in time if its CPU time is within the
limit: a verifier that was itself starved and looked late does not fail it. Where the CPU time
cannot be read at all, the limit is wall-clock.

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

from deepgym_cgroup import V2_COUNTER, accounts

__all__ = ["STARVED", "STARVED_FACTOR", "WALL_FACTOR", "CpuClock", "Deadline", "RunTimer"]

WALL_FACTOR = 10  # wall-clock bound of a request, in multiples of its (CPU) limit
STARVED_FACTOR = 100  # with no run timer, the most wall-clock time a request may take, ditto
_POLL = 0.1  # seconds between readings once a request has run its limit in wall time
# A request that ran out of wall-clock time in all was starved by others only if its process
# ran no more CPU besides its main thread than this and a quarter of the main thread's.
_OWN_NOISE = 0.002
_TICK = os.sysconf("SC_CLK_TCK")
_RUN = []  # the run's RunTimer while it runs (one per runner process)
# Why a request of this run ran out of wall-clock time in all while the machine's load, not the
# answer, kept its process waiting for a CPU (see Deadline._starved_by_others). The run's
# verdict stands; the host may run it again (scoring.judging), where the load may have passed.
STARVED = []


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
        self.group, self.pid = group, pid
        names = ("stat", "schedstat") if pid is not None else ()
        for name in names:
            try:
                self.fds[name] = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                pass
        counter = accounts(group.path) if group is not None else None
        if counter is not None:
            try:
                self.fds["group"] = os.open(counter, os.O_RDONLY | os.O_CLOEXEC)
                self.v2 = counter.endswith(V2_COUNTER)
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

    def sched(self):
        """(seconds on a CPU, seconds waiting for one) of the main thread, or None."""
        fd = self.fds.get("schedstat")
        try:
            ran, waited = os.pread(fd, 128, 0).split()[:2]
            return int(ran) / 1e9, int(waited) / 1e9
        except (TypeError, OSError, ValueError):
            return None

    def other_threads_ran(self):
        """CPU seconds the process's other threads ran in all their lives (0.0 if unknown)."""
        total = 0.0
        try:
            tids = [t for t in os.listdir(f"/proc/{self.pid}/task") if t != str(self.pid)]
        except (OSError, TypeError):
            return total
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                continue
        return total

    def scheduling(self):
        """(runnable now, nice, scheduling policy) of the process, or None. One that lowers
        its own priority makes itself wait for a CPU."""
        fd = self.fds.get("stat")
        try:
            data = os.pread(fd, 2048, 0)
            fields = data[data.rindex(b")") + 2:].split()
            return fields[0] == b"R", int(fields[16]), int(fields[38])
        except (TypeError, OSError, ValueError, IndexError):
            return None

    def queued(self):
        """Seconds spent runnable but not running, or None when they cannot be read."""
        fd = self.fds.get("schedstat")
        return _queued(fd) if fd is not None else None

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def _as_eager_as_us(nice, policy):
    """Whether a solution process's niceness and policy are the ordinary policy at no lower a
    priority than this runner's: it inherits ours, and only lowering its own makes it wait."""
    return policy == 0 and nice <= os.getpriority(os.PRIO_PROCESS, 0)


def _queued(fd):
    """Seconds the thread of the ``schedstat`` file ``fd`` spent runnable but not running."""
    try:
        return int(os.pread(fd, 128, 0).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class RunTimer:
    """The run's time limit, on this process's interval timer: ``expired(reason)`` is called
    (in the main thread, from SIGALRM; it raises) once the run has had ``limit`` seconds of
    wall-clock time not spent waiting for a CPU, or ``hard`` seconds in all. The
    waits counted are those of the thread that called :meth:`start` and those of the solution
    processes during their requests (credited by :class:`Deadline`); waits that overlap are
    counted twice, which only the hard bound limits.

    Example:
        timer = RunTimer(60, 180, raise_deadline)
        timer.start()
        try:
            run_the_verifier()
        finally:
            timer.stop()
    """

    def __init__(self, limit, hard, expired):
        self.limit, self.expired = max(0.05, float(limit)), expired
        self.hard = max(self.limit, float(hard))
        self.credited, self.started, self.fd = 0.0, None, None
        self.queued_start = None

    def start(self):
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = None
        self.queued_start = _queued(self.fd) if self.fd is not None else None
        self.started = time.monotonic()
        _RUN[:] = [self]
        signal.signal(signal.SIGALRM, self._alarm)
        signal.setitimer(signal.ITIMER_REAL, self.limit)

    def stop(self):
        self.started = None  # a SIGALRM already pending when it is stopped is ignored
        signal.setitimer(signal.ITIMER_REAL, 0)
        _RUN.clear()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def credit(self, seconds):
        """Count ``seconds`` a solution process waited for a CPU as the machine's, not the run's."""
        self.credited += max(0.0, seconds)

    def left(self):
        """(seconds left in the run's limit, not counting its waits; seconds left in all)."""
        started, fd = self.started, self.fd
        if started is None:  # stopped (a verifier's thread may still ask)
            return 0.0, 0.0
        elapsed = time.monotonic() - started
        queued = _queued(fd) if fd is not None else None
        waited = self.credited + (queued - self.queued_start
                                  if None not in (queued, self.queued_start) else 0.0)
        return self.limit - (elapsed - min(waited, elapsed)), self.hard - elapsed

    def _alarm(self, signum, frame):
        if self.started is None:
            return
        active_left, hard_left = self.left()
        if hard_left <= 0:
            self.expired(f"{self.hard:g}s of wall-clock time in all")
        if active_left <= 0:
            self.expired(f"{self.limit:g}s, its waits for a CPU not counted")
        signal.setitimer(signal.ITIMER_REAL, max(0.01, min(active_left, hard_left)))


def _bounds(limit):
    """A request's two wall-clock bounds: on its time not spent waiting for a CPU, and on all
    of it (a third of the run's time left in each count; with no run timer, a third of the
    interval timer's time left, or else STARVED_FACTOR limits)."""
    if _RUN:
        active_left, hard_left = _RUN[0].left()
        return min(WALL_FACTOR * limit, max(active_left / 3, limit)), max(hard_left / 3, limit)
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
        # One read of the main thread's schedstat: its wait now, and its run time for
        # _starved_by_others.
        self.sched_start = clock.sched() if self.cpu_start is not None else None
        self.queued_start = self.sched_start[1] if self.sched_start is not None else None
        self.waited = 0.0  # of which the run's timer has been told
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
        if _RUN:  # the run's timer hears of the request's waits (none to tell otherwise)
            self._wait_for_cpu()
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
        active = elapsed - self._wait_for_cpu()
        if active >= bound:
            raise self.timed_out(f"{bound:g}s of wall-clock time (its waits for a CPU not "
                                 "counted)")
        if elapsed >= cap:
            if self._starved_by_others(used, elapsed):
                STARVED.append(f"a request took {elapsed:.1f}s, {self.waited:.1f}s of it "
                               f"waiting for a CPU, using {used:.2f}s of CPU")
            raise self.timed_out(f"{cap:g}s of wall-clock time in all")
        return min(self.limit - used, bound - active, cap - elapsed, _POLL)

    def _starved_by_others(self, used, elapsed):
        """Whether the machine's load, not the answer, kept this request waiting: its process
        is waiting for a CPU now or waited for much of the time (the kernel counts a wait only
        once it ends: a starved process's one long wait is not in the count yet), without
        lowering its own priority or running other threads or processes of its own (their CPU
        time is in ``used``). A sched_yield loop looks the same to the scheduler, and is noted
        too: getting this wrong costs the host another run, never a verdict."""
        now, start = self.clock.sched(), self.sched_start
        if now is None or start is None or used is None:
            return False
        scheduling = self.clock.scheduling()
        if scheduling is None or not _as_eager_as_us(*scheduling[1:]):
            return False
        if not scheduling[0] and self.waited < elapsed / 3:
            return False  # neither waiting for a CPU now nor for much of the time
        ran, threads = now[0] - start[0], self.clock.other_threads_ran()
        others = threads
        if "group" in self.clock.fds:  # a count to the microsecond of every process it started
            others += max(0.0, used - ran - threads)
        return others <= _OWN_NOISE + ran / 4

    def _wait_for_cpu(self):
        """Seconds the process waited for a CPU during this request; the run's timer is told
        of what is new (the machine's load, not the run's time)."""
        queued = self.clock.queued()
        if None in (queued, self.queued_start):
            return self.waited
        waited = min(queued - self.queued_start, time.monotonic() - self.started)
        if _RUN and waited > self.waited:
            _RUN[0].credit(waited - self.waited)
        self.waited = max(waited, self.waited)
        return self.waited
