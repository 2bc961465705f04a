"""The solution as a module in its own process: :func:`load_solution` and the connection to
that process (stdlib only).

A solution process (``deepgym_worker.py`` in ``module`` mode) imports the solution's source and
answers one request at a time over its pipes: marshal in, strict JSON back (``deepgym_wire``).
What the verifier gets is a :class:`deepgym_remote.SolutionModule`; the objects it reaches are
handles into the process (``deepgym_remote``). :func:`prewarm` starts a process before the
verifier asks for one.

Each request has the call timeout, counted in the CPU time of the solution process and what it
started (its own cgroup where there is one), with wall-clock bounds for an answer that waits
without computing (``deepgym_clock``). A request past its timeout raises ``TimeoutError`` and
the process is restarted for the next one (its handles are then gone).

Example (inside a verifier):
    sol = load_solution(solution_path)
    sol.coin_change([1, 2, 5], 11)   # runs in the solution process
    sol.LIMIT                        # a module-level value
"""

import builtins
import json
import marshal
import os
import subprocess
import threading
import weakref

from deepgym_clock import WALL_FACTOR, CpuClock, Deadline
from deepgym_proc import Drain
from deepgym_remote import SolutionMember, SolutionModule, bump_exports, make_handle
from deepgym_spawn import STATE, kill, mark_in_play, solution_dir, spawn
from deepgym_wire import (
    ArgEncoder,
    SolutionError,
    decode,
    encode_arg,
    exception_from,
    local_exception,
    tag,
)
from deepgym_worker import read_exact

__all__ = ["WALL_FACTOR", "Connection", "close_solution", "function_caller", "load_files",
           "load_solution", "prewarm", "read_source"]

MAX_MESSAGE = 64 << 20  # a reply larger than this is the solution's failure


def _module_process():
    proc = spawn({"mode": "module"}, solution_dir(), None, (subprocess.PIPE,) * 3)
    return proc, Drain(proc.stderr, 64 << 10)


def prewarm():
    """Start a solution process ahead of time (it runs none of the solution's code until
    :func:`load_solution` sends it), so its start-up overlaps the verifier's."""
    if STATE.get("warm") is None:
        STATE["warm"] = _module_process()


def _interpreter_pid(proc):
    """The pid of the solution's interpreter: the process itself, or under bwrap the first
    process below it that is not bwrap (bwrap's own init and its child)."""
    if getattr(proc, "zygote_child", False) or STATE["launch"].get("kind") != "bwrap":
        return proc.pid
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    data = f.read()
                comm = data[data.index(b"(") + 1:data.rindex(b")")]
                ppid = int(data[data.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append((int(entry), comm))
    todo = [proc.pid]
    while todo:
        for pid, comm in sorted(children.get(todo.pop(0), ())):
            if comm != b"bwrap":
                return pid
            todo.append(pid)
    return None


class Connection:
    """The verifier's side of one solution process: requests, timeouts, handles."""

    def __init__(self, source, filename, module, timeout):
        self.source, self.filename, self.module, self.timeout = source, filename, module, timeout
        self.proc = self.output = self.clock = None
        self.lock = threading.Lock()  # one request at a time: the pipe carries one exchange
        self.generation = 0  # bumped when the process restarts: older handles are gone
        self.objects = weakref.WeakValueDictionary()  # handle number -> handle (one each)
        self.exceptions = {}  # (name, base) -> local exception class
        self.released = []  # (generation, handle, count) dropped by the verifier
        self.refs = ()  # the current request's argument containers
        self.manifest = None
        self.tree = None  # {"files", "entry"} for a solution of several files

    def start(self):
        warm = STATE.get("warm")
        STATE["warm"] = None
        if warm is not None and warm[0].poll() is None:
            self.proc, self.output = warm
        else:
            if warm is not None:
                kill(warm[0])
            self.proc, self.output = _module_process()
        self.generation += 1
        self.objects = weakref.WeakValueDictionary()
        self.released = []
        # The solution's code enters play with this message (the process was only our code).
        mark_in_play()
        load = {"source": self.source, "filename": self.filename, "module": self.module}
        if self.tree is not None:
            load = dict(self.tree, module=self.module)
        # Under bwrap the interpreter is found once it runs: its import is timed by the clock.
        bwrap = STATE["launch"].get("kind") == "bwrap" and not getattr(self.proc, "zygote_child",
                                                                        False)
        # Its own cgroup (if any) counts every process it starts, from bwrap's first on.
        group = getattr(self.proc, "cpu_group", None)
        self.clock = CpuClock(None if bwrap else self.proc.pid, group)
        reply = self._exchange(load)
        if bwrap:
            old, self.clock = self.clock, CpuClock(_interpreter_pid(self.proc), group)
            if "group" in self.clock.fds:  # the same group's count: what ran since carries
                self.clock.mark = old.mark
            old.close()
        return reply

    def _exchange(self, message):
        deadline = Deadline(self.clock, self.timeout, self._timed_out)
        try:
            data = marshal.dumps(message)  # trusted data in; the worker need not import json
            self.proc.stdin.write(len(data).to_bytes(4, "big") + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reply read below reports the dead process
        deadline.start()
        try:
            fd = self.proc.stdout.fileno()
            header = read_exact(fd, 4, deadline.wait)
            size = int.from_bytes(header, "big")
            if size > MAX_MESSAGE:
                raise tag(SolutionError(f"the solution sent a reply of {size} bytes"), "error")
            reply = json.loads(read_exact(fd, size, deadline.wait).decode("utf-8",
                                                                          "surrogatepass"))
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
        if reply.get("ok") is not True:
            raise exception_from(reply, self)
        return reply

    @staticmethod
    def _timed_out(what):
        return tag(builtins.TimeoutError(f"the solution did not answer within {what}"), "timeout")

    def request(self, op, target, attr=None, args=None, kwargs=None, sync=False):
        """One request on ``target`` (the module or a handle); returns the decoded value."""
        message = {"op": op, "h": target._hid}
        if target._path:
            message["path"] = list(target._path)
        if attr is not None:
            message["attr"] = attr
        encoder = ArgEncoder(self.reference)
        if args is not None:
            message["args"] = encode_arg(tuple(args), ctx=encoder)
        if kwargs:
            message["kwargs"] = encode_arg(dict(kwargs), ctx=encoder)
        if sync and encoder.containers:
            message["sync"] = True
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            self._check_current(target)
            released, self.released = self.released, []
            rel = [[hid, n] for gen, hid, n in released if gen == self.generation]
            if rel:
                message["rel"] = rel
            reply = self._exchange(message)
            self.refs = encoder.containers
            try:
                if reply.get("done") is True and op == "next":
                    raise StopIteration  # the solution's iterator is exhausted
                if "mut" in reply:
                    # Only a request sent with ``sync`` may change the verifier's arguments: a
                    # write-back on any other reply is forged by the solution's process.
                    if not message.get("sync"):
                        raise ValueError("changes to arguments it was not asked for")
                    self._apply(reply["mut"])
                return decode(reply.get("value"), ctx=self)
            except (ValueError, TypeError, RecursionError, OverflowError, KeyError) as exc:
                raise tag(SolutionError(f"the solution sent an unreadable value: {exc}"),
                          "error") from None
            finally:
                self.refs = ()

    def _check_current(self, target):
        if target._hid != 0 and target._gen != self.generation:
            raise tag(SolutionError("the solution process was restarted after a timeout: "
                                    "this object is gone"), "error")

    def reference(self, value):
        """``["h", handle, path]`` for a handle of this process passed back as an argument."""
        if getattr(type(value), "_ask", None) is None or value._conn is not self:
            raise TypeError("only plain data and this solution's own objects can be passed "
                            f"to the solution, not {type(value).__name__}")
        self._check_current(value)
        return ["h", value._hid, list(value._path)]

    def handle(self, parts):
        """The local object for a handle the solution sent (one per handle number)."""
        hid, flags, type_name, name, methods, base = parts
        if base is not None and "C" in flags:
            local = local_exception(self.exceptions, (name or type_name, base),
                                    name or type_name, base, self.module)
            if local is not None:
                return local
        obj = self.objects.get(hid)
        if obj is None:
            obj = make_handle(self, hid, (flags, type_name, name, frozenset(methods), base))
            self.objects[hid] = obj
        if base is None:
            bump_exports(obj)
        return obj

    def _apply(self, changes):
        """Write the solution's changes to argument containers into the verifier's own: each
        container sent at most once, each with contents of its own type, and nothing written
        unless every change is well formed (a bad one leaves the verifier's arguments as
        they were)."""
        if type(changes) is not list or len(changes) > len(self.refs):
            raise ValueError("malformed changes")
        updates, seen = [], set()
        for change in changes:
            if type(change) is not list or len(change) != 2 or type(change[0]) is not int \
                    or not 0 <= change[0] < len(self.refs) or change[0] in seen:
                raise ValueError("malformed change")
            seen.add(change[0])
            container, new = self.refs[change[0]], decode(change[1], ctx=self)
            kind = type(container)
            if not (kind is bytearray and type(new) is bytes or type(new) is kind):
                raise ValueError("a change of the wrong type")
            updates.append((container, new))
        for container, new in updates:
            if type(container) in (list, bytearray):
                container[:] = new
            else:
                container.clear()
                container.update(new)

    def stop(self):
        if self.proc is not None:
            kill(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc = None
        if self.clock is not None:
            self.clock.close()
            self.clock = None


def _manifest(conn, reply):
    """name -> "c" (callable), "v" (a value) or the local class of an exception class."""
    names = {}
    entries = reply.get("names")
    if type(entries) is not list:
        raise tag(SolutionError("the solution sent garbage: no module names"), "error")
    for entry in entries:
        if type(entry) is not list or len(entry) not in (2, 3) or type(entry[0]) is not str:
            continue
        if entry[1] in ("c", "v"):
            names[entry[0]] = entry[1]
        elif entry[1] == "x" and len(entry) == 3:
            try:
                local = decode(entry[2], ctx=conn)
            except (ValueError, TypeError):
                continue
            names[entry[0]] = local if isinstance(local, type) else "c"
    return names


def read_source(path):
    """The solution's source text (reading it puts the answer in play)."""
    mark_in_play()
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def load_solution(path, timeout=None):
    """Start a solution process that imports the file at ``path``; returns the solution's
    module as a :class:`deepgym_remote.SolutionModule`.

    An error while importing (a syntax error, an exception, ``sys.exit``) is raised here.
    ``timeout`` bounds each request (default: the environment's ``case_timeout``), in the
    solution's CPU time (see the module docstring).
    """
    mark_in_play()
    with open(path, "rb") as f:  # bytes: compiled as Python reads a file (not UTF-8: fails)
        source = f.read()
    name = os.path.splitext(os.path.basename(path))[0] or "solution"
    if not name.isidentifier():
        name = "solution"
    filename = os.path.join(solution_dir(), os.path.basename(path) or "solution.py")
    conn = Connection(source, filename, name, float(timeout or STATE["case_timeout"]))
    with conn.lock:
        reply = conn.start()
    doc = reply.get("doc") if type(reply.get("doc")) is str else None
    return SolutionModule(conn, _manifest(conn, reply), name, path, doc)


def load_files(files, entry, timeout=None):
    """Import a solution of several files (relative path -> source; a package or modules side
    by side) in a solution process, as :func:`load_solution` does one file; returns module
    ``entry`` (a module name, ``pkg.mod``, or its file, ``pkg/mod.py``)."""
    mark_in_play()
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise TypeError("files must be a dict of relative paths to source texts")
    for path in files:
        parts = path.split("/")
        if not path or path.startswith("/") or ".." in parts or "" in parts:
            raise ValueError(f"{path!r} is not a relative path inside the solution")
    if not isinstance(entry, str) or not entry:
        raise TypeError("entry must name a module of the files")
    if entry.endswith(".py"):
        entry = entry[:-3].replace("/", ".").removesuffix(".__init__")
    conn = Connection(None, entry, entry, float(timeout or STATE["case_timeout"]))
    conn.tree = {"files": dict(files), "entry": entry}
    with conn.lock:
        reply = conn.start()
    doc = reply.get("doc") if type(reply.get("doc")) is str else None
    return SolutionModule(conn, _manifest(conn, reply), entry, entry, doc)


def close_solution(solution):
    """Stop the solution process behind ``solution`` now (whatever names it defines)."""
    solution._conn.stop()


def function_caller(solution, name):
    """``solution.name(*args)`` that leaves the arguments as they were sent: changes the
    solution makes to them stay in its process (for case loops whose inputs are shared)."""
    conn = solution._conn
    target = SolutionMember(conn, 0, (name,), owner=solution)

    def call(*args):
        return conn.request("call", target, args=args)

    call.__name__ = name
    return call
