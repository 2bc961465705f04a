"""When a request to the solution process is over (stdlib only): the solution's clocks and the
limits of one request.

A request's limit is counted in the solution process's own CPU time (its ``utime + stime`` and
its reaped children's, from ``/proc/<pid>/stat``), so a neighbour's load does not turn a right
answer into a timeout. An answer that waits without computing (sleeps, blocks, stops itself) is
ended by a wall-clock bound of :data:`WALL_FACTOR` times the limit. The time the solution spent
ready to run but waiting for a CPU (``/proc/<pid>/schedstat``) is left out of that bound: it is
the machine's load, not the answer's doing. However starved, no request outlasts a third of what
is left of the run's own time limit (the runner's interval timer), so an answer that keeps
timing out fails its cases instead of the whole run. A reply already waiting when a limit is
checked counts as in time if its CPU time is within the limit: a verifier that was itself
starved and looked late does not fail it. Where the CPU time cannot be read, the limit is
wall-clock.

Example:
    deadline = Deadline(CpuClock(proc.pid), 0.5, TimeoutError)
    proc.stdin.write(request)
    deadline.start()
    read_exact(proc.stdout.fileno(), size, deadline.wait)   # TimeoutError past a limit
"""

import os
import select
import signal
import time

__all__ = ["STARVED_FACTOR", "WALL_FACTOR", "CpuClock", "Deadline"]

WALL_FACTOR = 10  # wall-clock bound of a request, in multiples of its (CPU) limit
STARVED_FACTOR = 100  # with no run timer, the most wall-clock time a request may take, ditto
_POLL = 0.1  # seconds between readings once a request has run its limit in wall time
_TICK = os.sysconf("SC_CLK_TCK")


class CpuClock:
    """CPU seconds used by one process and its reaped children (``/proc/<pid>/stat``), and the
    seconds its main thread waited for a CPU (``/proc/<pid>/schedstat``)."""

    def __init__(self, pid):
        self.fds = {}
        for name in ("stat", "schedstat"):
            if pid is not None:
                try:
                    self.fds[name] = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    pass

    def read(self):
        """CPU seconds, or None when they cannot be read (the process is gone, no /proc)."""
        try:
            data = os.pread(self.fds["stat"], 2048, 0)
            fields = data[data.rindex(b")") + 2:].split()
            # utime + stime + cutime + cstime, in clock ticks
            return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / _TICK
        except (KeyError, OSError, ValueError, IndexError):
            return None

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
        self.cpu_start = clock.read() if clock is not None else None
        self.queued_start = clock.queued() if self.cpu_start is not None else None
        self.started = time.monotonic()
        self.bounds = None  # worked out only for a request that outlasts its limit

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
                return

    def _past_limit(self, fd, elapsed):
        """None when a reply is waiting within the CPU limit, else how long to wait next."""
        ready = bool(select.select([fd], [], [], 0)[0])  # before the clock: its time is final
        used = self.clock.read() if self.cpu_start is not None else None
        if used is None:
            if ready:
                return None
            raise self.timed_out(f"{self.limit:g}s")
        used -= self.cpu_start
        if used >= self.limit:
            raise self.timed_out(f"{self.limit:g}s of CPU time")
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
