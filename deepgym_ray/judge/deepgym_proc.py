"""Small process helpers shared by the judge and the host (stdlib only).

It imports nothing of the judge and does nothing when imported, so the host's local provider
uses it too (``from deepgym_ray.judge.deepgym_proc import wait_exit``), while in a sandbox the
runner's solution processes use it.

Example:
    >>> import subprocess, sys
    >>> proc = subprocess.Popen([sys.executable, "-c", "pass"])
    >>> wait_exit(proc, 10), proc.returncode
    (True, 0)
"""

import os
import select
import signal
import subprocess
import threading
import time

__all__ = ["WORKER_PARTS", "Drain", "kill_as", "kill_uid", "parent_of", "uid_processes",
           "wait_exit", "worker_parts", "worker_source"]


def wait_exit(proc, timeout, wake=None):
    """Wait for ``proc`` to exit; False at the deadline, or once the descriptor ``wake`` (if
    given) is readable: the run was given up, and the caller kills it as at the deadline.
    A pidfd wakes us the moment it exits (``Popen.wait(timeout)`` polls with sleeps growing to
    50 ms, a cost on every run)."""
    own = getattr(proc, "wait_for", None)  # a zygote's child: not ours to pidfd by pid
    if own is not None:
        return own(timeout)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or not Linux)
        return _wait_polling(proc, timeout, wake)
    try:
        waiting = [pidfd] if wake is None else [pidfd, wake]
        ready, _, _ = select.select(waiting, [], [], max(0.0, timeout))
    finally:
        os.close(pidfd)
    if pidfd not in ready:
        return proc.poll() is not None
    proc.wait()
    return True


def _wait_polling(proc, timeout, wake):
    if wake is None:
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0 or select.select([wake], [], [], min(left, 0.05))[0]:
            return False
    return True


class Drain(threading.Thread):
    """Reads a pipe to the end, keeping at most ``limit`` bytes (so a flood cannot fill memory)
    in ``data``; ``dropped`` counts the rest."""

    def __init__(self, stream, limit):
        super().__init__(daemon=True)
        self.stream, self.limit, self.data, self.dropped = stream, limit, bytearray(), 0
        self.start()

    def run(self):
        try:
            while True:
                chunk = self.stream.read1(1 << 16)
                if not chunk:
                    break
                room = self.limit - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (OSError, ValueError):
            pass

    def text(self):
        return self.data.decode("utf-8", "replace")


def kill_as(uid):
    """``kill(-1, SIGKILL)`` run as ``uid``: the kernel signals every process of that uid in one
    pass that forks cannot race (a forking process with a fatal signal pending has its fork
    undone), unlike a search of /proc followed by kills."""
    try:
        subprocess.run(["kill", "-s", "KILL", "--", "-1"], user=uid, group=uid, extra_groups=[],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10, close_fds=True, cwd="/",
                       env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        pass  # the search of /proc in kill_uid still kills what it finds


def uid_processes(uid):
    """Live (not zombie) processes with ``uid`` as any of their uids."""
    return [pid for pid, zombie in _processes_of(uid) if not zombie]


def _processes_of(uid):
    """Yield ``(pid, zombie)``, while scanning /proc, for each process with ``uid`` as any of
    its uids. Reads /proc/<pid>/status, since a process that changed uid is not dumpable and
    its /proc entry belongs to root."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        state = uid_line = None
        for line in text.splitlines():
            if line.startswith("State:"):
                state = line.split()[1]
            elif line.startswith("Uid:"):
                uid_line = line.split()[1:]
                break
        if uid_line and str(uid) in uid_line:
            yield int(entry), state == "Z"


def kill_uid(uid, rounds=50, wait_for_zombies=True):
    """Kill every process owned by ``uid`` (where no cgroup holds them); True once a search
    of /proc finds none left, False when some survived ``rounds`` rounds.

    ``wait_for_zombies``: a zombie of the uid counts as left, so the sweep goes on until its
    parent has reaped it. In a sandbox that time is what lets a process still being started
    for the run (forked as root, then given the uid) be seen and killed too; the host's
    provider, which cannot count on init reaping its orphans soon, passes False."""
    for attempt in range(rounds):
        if os.geteuid() == 0 and attempt % 10 == 0:
            kill_as(uid)  # fails when the uid is at its process limit: the scan still works
        found = False
        # Killed the moment the scan sees it, not after the scan: processes that keep forking
        # (a hydra at its process limit) get no time to replace themselves meanwhile.
        for pid, zombie in _processes_of(uid):
            if zombie:
                found = found or wait_for_zombies
                continue
            found = True
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not found:
            return True
        time.sleep(0.002)
    return False


def wait_reaped(pids, deadline):
    """Wait (to the ``time.monotonic()`` ``deadline``) until the killed ``pids`` are reaped,
    not just dead: an orphan's zombie waits for the sandbox's init, and until then it still
    answers a signal as if alive (on a loaded machine, for a while). True when all were."""
    for pid in pids:
        while os.path.exists(f"/proc/{pid}"):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
    return True


def parent_of(pid):
    """The parent pid of ``pid`` from /proc, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


# The solution process's program: these judge files, the last one run as ``__main__``. A
# solution process cannot import the judge's files (they are not in its sandbox's view, or not
# readable by its uid), so their text travels in the program itself.
WORKER_PARTS = ("deepgym_reply.py", "deepgym_tree.py", "deepgym_worker.py")


def worker_parts(directory):
    """(module name, source) of each of ``WORKER_PARTS``, read from ``directory``."""
    parts = []
    for name in WORKER_PARTS:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            parts.append((name[:-3], f.read()))
    return parts


def worker_source(directory):
    """The solution process's program as one text for ``python -c``: it makes each part but
    the last a module of its own name, then runs the last (``deepgym_worker``) in place."""
    *modules, (_name, main) = worker_parts(directory)
    return ("import sys as _dg_sys\n"
            f"for _dg_n, _dg_s in {tuple(modules)!r}:\n"
            "    _dg_m = _dg_sys.modules[_dg_n] = type(_dg_sys)(_dg_n)\n"
            "    _dg_m.__file__ = _dg_n + '.py'\n"
            "    exec(compile(_dg_s, _dg_m.__file__, 'exec'), _dg_m.__dict__)\n"
            "del _dg_sys, _dg_n, _dg_s, _dg_m\n"
            f"exec(compile({main!r}, 'deepgym_worker.py', 'exec'))\n")
