"""What a verifier imports to use the solution without ever running it itself (stdlib only).

Every call goes to a separate solution process (started by :func:`load_solution`, isolated as
the sandbox provider arranged), and only plain data comes back: None, bool, int, float, complex,
str, bytes, list, tuple, dict, set, frozenset. Anything else arrives as an :class:`OpaqueValue`
that equals nothing. An exception raised by the solution is raised here: a builtin exception
keeps its type, any other becomes :class:`SolutionError`. A call that runs past the case
timeout raises ``TimeoutError`` and the solution process is restarted for the next call.

Example (inside a verifier):
    from deepgym_solution import load_solution
    sol = load_solution(solution_path)
    try:
        ok = sol.coin_change([1, 2, 5], 11) == 3
    except Exception:
        ok = False
"""

import builtins
import json
import marshal
import os
import select
import signal
import subprocess
import threading
import time

from deepgym_wire import OpaqueValue, SolutionError, decode, encode_arg, exception_from, tag

__all__ = [
    "OpaqueValue",
    "SolutionError",
    "SolutionRun",
    "load_solution",
    "run_solution",
    "solution_source",
]

# Set by the runner through configure(); the defaults let a verifier run by hand.
_STATE = {
    "launch": {"kind": "plain", "prefix": [], "python": None, "uid": None, "limits": {}},
    "solution_dir": None,
    "case_timeout": 10.0,
    "on_in_play": None,
    "in_play": False,
    "worker_source": None,
}
_LIVE = set()
_LOCK = threading.Lock()

MAX_MESSAGE = 64 << 20  # a reply larger than this is the solution's failure
MAX_OUTPUT = 1 << 20  # bytes of a script's stdout/stderr kept for the verifier


class SolutionRun:
    """What :func:`run_solution` returns: exit code, output (bounded, text) and timed_out."""

    def __init__(self, exit_code, stdout, stderr, timed_out):
        self.exit_code = self.returncode = exit_code
        self.stdout, self.stderr, self.timed_out = stdout, stderr, timed_out

    def __repr__(self):
        return f"SolutionRun(exit_code={self.exit_code!r}, timed_out={self.timed_out!r})"


def configure(**settings):
    """Called by the runner before the verifier starts."""
    _STATE.update(settings)


def mark_in_play():
    """Record that the policy's answer is now in play (failures after this are its own)."""
    if _STATE["in_play"]:
        return
    _STATE["in_play"] = True
    callback = _STATE["on_in_play"]
    if callback is not None:
        callback()


# --- solution processes --------------------------------------------------------------------

def _solution_dir():
    path = _STATE["solution_dir"]
    if path is None:
        import tempfile

        path = _STATE["solution_dir"] = tempfile.mkdtemp(prefix="deepgym-solution-")
    return path


def _worker_source():
    if _STATE["worker_source"] is None:
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "deepgym_worker.py"), encoding="utf-8") as f:
            _STATE["worker_source"] = f.read()
    return _STATE["worker_source"]


def _spawn(config, cwd, extra_env, pipes):
    """Start a solution process with the provider's isolation; returns the Popen."""
    launch = _STATE["launch"]
    python = launch.get("python") or _default_python()
    config = dict(config, uid=launch.get("uid"), limits=launch.get("limits") or {})
    inner = [python, "-I", "-S", "-c", _worker_source(), marshal.dumps(config).hex()]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    env.update(extra_env or {})
    if launch.get("kind") == "bwrap":
        command = list(launch["prefix"]) + ["--chdir", cwd]
        for key, value in env.items():
            command += ["--setenv", key, value]
        command += ["--", *inner]
        popen_env, popen_cwd = {}, None
    else:
        command, popen_env, popen_cwd = inner, env, cwd
    proc = subprocess.Popen(
        command, stdin=pipes[0], stdout=pipes[1], stderr=pipes[2], cwd=popen_cwd,
        env=popen_env, close_fds=True, start_new_session=True,
    )
    with _LOCK:
        _LIVE.add(proc)
    return proc


def _default_python():
    import sys

    return getattr(sys, "_base_executable", None) or sys.executable


def _kill(proc):
    """Kill a solution process and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
    uid = _STATE["launch"].get("uid")
    if uid is not None and _STATE["launch"].get("kind") != "bwrap" and os.getuid() == 0:
        kill_uid(uid)
    _wait_exit(proc, 5)
    with _LOCK:
        _LIVE.discard(proc)


def kill_uid(uid):
    """Kill every process owned by ``uid`` (used where no PID namespace holds them)."""
    for _ in range(50):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                found = True
                                os.kill(int(entry), signal.SIGKILL)
                            break
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.002)


def shutdown_all():
    """Kill every solution process still alive (the runner calls this before reporting)."""
    with _LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _kill(proc)


class _Drain(threading.Thread):
    """Reads a pipe to the end, keeping at most ``limit`` bytes (so a flood cannot fill memory)."""

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


def _module_process():
    proc = _spawn({"mode": "module"}, _solution_dir(), None, (subprocess.PIPE,) * 3)
    return proc, _Drain(proc.stderr, 64 << 10)


def prewarm():
    """Start a solution process ahead of time (it runs none of the solution's code until
    :func:`load_solution` sends it), so its start-up overlaps the verifier's."""
    if _STATE.get("warm") is None:
        _STATE["warm"] = _module_process()


class _Worker:
    def __init__(self, source, filename, module, timeout):
        self.source, self.filename, self.module, self.timeout = source, filename, module, timeout
        self.proc = None
        self.output = None
        self.lock = threading.Lock()  # one call at a time: the pipe carries one exchange

    def start(self):
        warm = _STATE.get("warm")
        _STATE["warm"] = None
        if warm is not None and warm[0].poll() is None:
            self.proc, self.output = warm
        else:
            if warm is not None:
                _kill(warm[0])
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
        fd = self.proc.stdout.fileno()
        chunks, need = [], size
        while need:
            left = deadline - time.monotonic()
            if left <= 0:
                raise tag(builtins.TimeoutError(
                    f"the solution did not answer within {self.timeout:g}s"), "timeout")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, min(need, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            need -= len(chunk)
        return b"".join(chunks)

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
            _kill(self.proc)
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


def _read_source(path):
    mark_in_play()
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def solution_source(path):
    """The solution's source text."""
    return _read_source(path)


def load_solution(path, timeout=None):
    """Start a solution process that imports the file at ``path``; returns a call proxy.

    An error while importing (a syntax error, an exception, ``sys.exit``) is raised here.
    ``timeout`` bounds each call (default: the environment's ``case_timeout``).
    """
    source = _read_source(path)
    name = os.path.splitext(os.path.basename(path))[0] or "solution"
    if not name.isidentifier():
        name = "solution"
    filename = os.path.join(_solution_dir(), os.path.basename(path) or "solution.py")
    worker = _Worker(source, filename, name, float(timeout or _STATE["case_timeout"]))
    worker.start()
    return SolutionProxy(worker)


def run_solution(path, args=(), stdin=None, cwd=None, env=None, timeout=None):
    """Run the solution file as a script; returns a :class:`SolutionRun` (output bounded)."""
    mark_in_play()
    sol_dir = _solution_dir()
    target = os.path.join(sol_dir, os.path.basename(path))
    if os.path.abspath(path) != target:
        _copy_in(path, target)
    config = {"mode": "script", "script": target, "args": [str(a) for a in args]}
    proc = _spawn(config, cwd or sol_dir, env, (subprocess.PIPE,) * 3)
    out, err = _Drain(proc.stdout, MAX_OUTPUT), _Drain(proc.stderr, MAX_OUTPUT)
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin or b""), daemon=True)
    feeder.start()
    limit = float(timeout or _STATE["case_timeout"])
    timed_out = not _wait_exit(proc, limit)
    _kill(proc)
    out.join(1)
    err.join(1)
    code = None if timed_out else proc.returncode
    return SolutionRun(code, out.text(), err.text(), timed_out)


def _wait_exit(proc, timeout):
    """Wait for ``proc`` to exit (False at the deadline), woken by a pidfd when there is one."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([pidfd], [], [], max(0.0, timeout))
    finally:
        os.close(pidfd)
    if not ready:
        return proc.poll() is not None
    proc.wait()
    return True


def _copy_in(path, target):
    """Copy a file into the solution's directory without following anything the solution may
    have planted there (a symlink named like the target would make us write elsewhere)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        os.unlink(target)  # never follows a symlink
    except FileNotFoundError:
        pass
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _feed(stream, data):
    try:
        stream.write(data)
    except OSError:
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass
