"""The verifier's ways out of the runner's process, made exits the runner can report (stdlib only).

A verifier may end itself with ``os._exit`` or by signalling its own process; each such way has
more than one name (``posix._exit`` is the very function ``os._exit`` is, and a trap set on
``os`` alone misses it). :func:`trap_exits` replaces every name in the modules that hold it:

- in the runner's main thread, ``_exit(code)`` raises :class:`OsExit` (a ``SystemExit``: the
  verifier's exit, as ``sys.exit(code)``), and a signal that would end or stop the runner
  (``os.kill``/``os.killpg`` of its own process or group, ``signal.raise_signal``,
  ``signal.pthread_kill``, ``os.abort``) raises ``OsExit(128 + signal)``: an exit status other
  than 0 or 1, the verifier's own error without a verdict;
- in another thread of the runner, where nothing can be raised into the verifier, they end the
  process with the real ``_exit(2)``: the host reads a runner that exited 2 without a result as
  the verifier's own error (never a verdict the verifier did not give);
- in any other process (a child the verifier forked) they are the real functions.

Example (what the runner does before the verifier runs):
    real_exit = trap_exits()
    ...
    real_exit(code)  # the runner's own exit, after its result
"""

import _signal
import os
import posix
import signal
import threading

__all__ = ["OsExit", "trap_exits"]

# Signals whose default action neither ends nor stops a process.
_HARMLESS = frozenset({0, signal.SIGCHLD, signal.SIGCONT, signal.SIGURG, signal.SIGWINCH})


class OsExit(SystemExit):
    """``os._exit`` (or a signal that would end the runner) called by the verifier in the
    runner's main thread: ended like ``sys.exit`` instead, so the runner still reports (and
    kills the solution's processes)."""


def _ends_process(sig):
    """Would ``sig`` end or stop this process (its default action, no handler set)?"""
    try:
        sig = int(sig)
        return sig not in _HARMLESS and signal.getsignal(sig) == signal.SIG_DFL
    except (TypeError, ValueError, OverflowError):
        return False  # the real call raises its own error


def trap_exits():
    """Replace the ways out (see the module docstring); returns the real ``_exit``."""
    real = {name: getattr(posix, name) for name in ("_exit", "kill", "killpg", "abort")}
    real["raise_signal"], real["pthread_kill"] = _signal.raise_signal, _signal.pthread_kill
    runner_pid, main_thread = os.getpid(), threading.main_thread()

    def leave(code):
        """End the verifier with ``code``, as far as this thread can."""
        if threading.current_thread() is main_thread:
            raise OsExit(code)
        real["_exit"](2)

    def _exit(code):
        if os.getpid() != runner_pid:
            real["_exit"](code)
        leave(code)

    def kill(pid, sig):
        me = os.getpid()
        if me == runner_pid and pid in (me, 0, -1, -os.getpgrp()) and _ends_process(sig):
            leave(128 + int(sig))
        return real["kill"](pid, sig)

    def killpg(pgid, sig):
        if os.getpid() == runner_pid and pgid in (0, os.getpgrp()) and _ends_process(sig):
            leave(128 + int(sig))
        return real["killpg"](pgid, sig)

    def raise_signal(sig):
        if os.getpid() == runner_pid and _ends_process(sig):
            leave(128 + int(sig))
        return real["raise_signal"](sig)

    def pthread_kill(thread_id, sig):
        # Any thread's fatal signal ends the whole process.
        if os.getpid() == runner_pid and _ends_process(sig):
            leave(128 + int(sig))
        return real["pthread_kill"](thread_id, sig)

    def abort():
        if os.getpid() != runner_pid:
            real["abort"]()
        leave(128 + signal.SIGABRT)

    traps = {"_exit": _exit, "kill": kill, "killpg": killpg, "abort": abort,
             "raise_signal": raise_signal, "pthread_kill": pthread_kill}
    for module in (os, posix, signal, _signal):
        for name, trap in traps.items():
            if getattr(module, name, None) is real[name]:
                trap.__name__ = trap.__qualname__ = name
                setattr(module, name, trap)
    return real["_exit"]
