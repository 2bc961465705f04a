"""The solution as a module in its own process: :func:`load_solution` and its call proxy
(stdlib only).

A solution process (``deepgym_worker.py`` in ``module`` mode) imports the solution's source and
answers one call at a time over its pipes: marshal in, strict JSON back (``deepgym_wire``). A
call that runs past its timeout raises ``TimeoutError`` and the process is restarted for the
next call. :func:`prewarm` starts a process before the verifier asks for one.

Example (inside a verifier):
    sol = load_solution(solution_path)
    sol.coin_change([1, 2, 5], 11)   # runs in the solution process
    sol.get("LIMIT")                 # a module-level value
"""

import builtins
import json
import marshal
import os
import select
import subprocess
import threading
import time

from deepgym_proc import Drain
from deepgym_spawn import STATE, kill, mark_in_play, solution_dir, spawn
from deepgym_wire import SolutionError, decode, encode_arg, exception_from, tag
from deepgym_worker import read_exact

__all__ = ["SolutionProxy", "load_solution", "prewarm", "read_source"]

MAX_MESSAGE = 64 << 20  # a reply larger than this is the solution's failure


def _module_process():
    proc = spawn({"mode": "module"}, solution_dir(), None, (subprocess.PIPE,) * 3)
    return proc, Drain(proc.stderr, 64 << 10)


def prewarm():
    """Start a solution process ahead of time (it runs none of the solution's code until
    :func:`load_solution` sends it), so its start-up overlaps the verifier's."""
    if STATE.get("warm") is None:
        STATE["warm"] = _module_process()


class _Worker:
    def __init__(self, source, filename, module, timeout):
        self.source, self.filename, self.module, self.timeout = source, filename, module, timeout
        self.proc = None
        self.output = None
        self.lock = threading.Lock()  # one call at a time: the pipe carries one exchange

    def start(self):
        warm = STATE.get("warm")
        STATE["warm"] = None
        if warm is not None and warm[0].poll() is None:
            self.proc, self.output = warm
        else:
            if warm is not None:
                kill(warm[0])
            self.proc, self.output = _module_process()
        # The solution's code enters play with this message (the process was only our code).
        mark_in_play()
        load = {"source": self.source, "filename": self.filename, "module": self.module}
        return self._exchange(load)

    def _exchange(self, message):
        try:
            data = marshal.dumps(message)  # trusted data in; the worker need not import json
            self.proc.stdin.write(len(data).to_bytes(4, "big") + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reply read below reports the dead process
        deadline = time.monotonic() + self.timeout
        try:
            header = self._read(4, deadline)
            size = int.from_bytes(header, "big")
            if size > MAX_MESSAGE:
                raise tag(SolutionError(f"the solution sent a reply of {size} bytes"), "error")
            reply = json.loads(self._read(size, deadline).decode("utf-8", "surrogatepass"))
            if not isinstance(reply, dict):
                raise ValueError("reply is not an object")
        except builtins.TimeoutError:
            self.stop()
            raise
        except EOFError:
            proc, drain = self.proc, self.output
            self.stop()
            if drain is not None:
                drain.join(1)
            tail = drain.text()[-1500:] if drain is not None else ""
            raise tag(SolutionError(f"the solution process exited (code {proc.returncode})"
                                     + (f": {tail}" if tail else "")), "error") from None
        except (ValueError, TypeError, UnicodeError) as exc:
            self.stop()
            raise tag(SolutionError(f"the solution sent garbage: {exc}"), "error") from None
        if not reply.get("ok"):
            raise exception_from(reply)
        return reply

    def _read(self, size, deadline):
        def wait(fd):  # before each read: data ready, or TimeoutError at the deadline
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise tag(builtins.TimeoutError(
                        f"the solution did not answer within {self.timeout:g}s"), "timeout")
                if select.select([fd], [], [], left)[0]:
                    return

        return read_exact(self.proc.stdout.fileno(), size, wait)

    def call(self, name, args, kwargs, do_call=True):
        message = {"name": name, "args": encode_arg(tuple(args)),
                   "kwargs": encode_arg(dict(kwargs)), "call": do_call}
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            reply = self._exchange(message)
        try:
            return decode(reply.get("value"))
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            raise tag(SolutionError(f"the solution sent an unreadable value: {exc}"),
                       "error") from None

    def stop(self):
        if self.proc is not None:
            kill(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc = None


class SolutionProxy:
    """Attribute calls run in the solution process: ``proxy.f(1, 2)``; ``proxy.get('X')``
    fetches a module-level value."""

    def __init__(self, worker):
        object.__setattr__(self, "_worker", worker)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        worker = self._worker

        def call(*args, **kwargs):
            return worker.call(name, args, kwargs)

        call.__name__ = name
        return call

    def get(self, name):
        """The value of a module-level name (plain data only)."""
        return self._worker.call(name, (), {}, do_call=False)

    def close(self):
        """Stop the solution process now (it is stopped at the end of the run anyway)."""
        self._worker.stop()

    @property
    def output(self):
        """What the solution printed so far (bounded)."""
        drain = self._worker.output
        return drain.text() if drain is not None else ""


def read_source(path):
    """The solution's source text (reading it puts the answer in play)."""
    mark_in_play()
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def load_solution(path, timeout=None):
    """Start a solution process that imports the file at ``path``; returns a call proxy.

    An error while importing (a syntax error, an exception, ``sys.exit``) is raised here.
    ``timeout`` bounds each call (default: the environment's ``case_timeout``).
    """
    mark_in_play()
    with open(path, "rb") as f:  # bytes: compiled as Python reads a file (not UTF-8: fails)
        source = f.read()
    name = os.path.splitext(os.path.basename(path))[0] or "solution"
    if not name.isidentifier():
        name = "solution"
    filename = os.path.join(solution_dir(), os.path.basename(path) or "solution.py")
    worker = _Worker(source, filename, name, float(timeout or STATE["case_timeout"]))
    worker.start()
    return SolutionProxy(worker)
