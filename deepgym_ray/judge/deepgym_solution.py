"""What a verifier imports to use the solution without ever running it itself (stdlib only).

:func:`load_solution` returns the solution's module as seen from the verifier: every piece of the
solution's code runs in a separate solution process (isolated as the sandbox provider arranged;
see ``deepgym_proxy`` and ``deepgym_remote``), and only plain data crosses: None, bool, int,
float, complex, str, bytes, list, tuple, dict, set, frozenset. What a verifier can do with it:
- names: ``dir(sol)``, ``hasattr``, ``getattr(sol, name, default)``, ``name in vars(sol)``,
  ``sol.__name__``, ``__doc__`` of the module and its functions and classes, ``callable``,
  ``inspect.signature(sol.f)`` (annotations as text);
- values: module-level constants read as plain values (``sol.LIMIT == 7``);
- classes and instances: ``sol.Solution().twoSum(nums, target)``, ``cache = sol.LRUCache(2)``:
  an object that is not plain data stays in the solution process and arrives as a handle
  (attributes, methods, items, ``len``, truth, ``isinstance``), which can be passed back as an
  argument; like any value that is not plain data it equals nothing;
- generators and iterators, iterated lazily (``next``, ``for``, ``list``), a step per exchange;
- in-place problems: a list, dict, set or bytearray argument the call changed shows the change
  in the verifier's own object after the call.
An exception raised by the solution is raised here: a builtin exception keeps its type, a
solution-defined one arrives as a subclass of its builtin base (``except ValueError`` catches
it, and so does ``except sol.InvalidInput``), control flow (StopIteration, SystemExit, ...) and
anything else as :class:`SolutionError`. Unreadable or self-referencing values arrive as an
:class:`OpaqueValue` that equals nothing. Each request has the case timeout, counted in the
solution's own CPU time (with a wall-clock bound of ``WALL_FACTOR`` times it, see
``deepgym_clock``); past it, ``TimeoutError`` is raised and the solution process is restarted
for the next call.

The rest of the runtime: :func:`run_solution` runs the solution as a script;
:func:`solution_source` gives its text (or one top-level ``def``/``class`` of it);
:func:`load_files` imports a solution of several files as ``load_solution`` does one;
:func:`solution_namespace` lists a loaded module's public names and values;
:func:`apply_patch` applies a unified diff to files held in memory (``deepgym_patch``);
:func:`read_output` and :func:`read_output_bytes` read a file the solution wrote, without
following anything it planted (``deepgym_output``); :func:`consulted` says whether the policy's
output has been read yet (the point that dates a failure: before it, no verdict).

Example (inside a verifier):
    from deepgym_solution import load_solution
    sol = load_solution(solution_path)
    try:
        ok = sol.coin_change([1, 2, 5], 11) == 3
    except Exception:
        ok = False
"""

import os
import subprocess
import threading

from deepgym_clock import CpuClock, Deadline
from deepgym_output import OutputRefused, read_output, read_output_bytes
from deepgym_patch import PatchError, PatchNotApplied, apply_patch
from deepgym_proc import Drain, wait_exit
from deepgym_proxy import load_files, load_solution, read_source
from deepgym_remote import SolutionModule, SolutionObject
from deepgym_spawn import STATE, kill, mark_in_play, solution_dir, spawn
from deepgym_wire import OpaqueValue, SolutionError

__all__ = [
    "OpaqueValue",
    "OutputRefused",
    "PatchError",
    "PatchNotApplied",
    "SolutionError",
    "SolutionRun",
    "apply_patch",
    "consulted",
    "load_files",
    "load_solution",
    "read_output",
    "read_output_bytes",
    "run_solution",
    "solution_namespace",
    "solution_source",
]

MAX_OUTPUT = 1 << 20  # bytes of a script's stdout/stderr kept for the verifier


class SolutionRun:
    """What :func:`run_solution` returns: exit code, output (bounded, text) and timed_out."""

    def __init__(self, exit_code, stdout, stderr, timed_out):
        self.exit_code = self.returncode = exit_code
        self.stdout, self.stderr, self.timed_out = stdout, stderr, timed_out

    def __repr__(self):
        return f"SolutionRun(exit_code={self.exit_code!r}, timed_out={self.timed_out!r})"


def solution_source(path, name=None):
    """The solution's source text; with ``name``, the source of its top-level ``def`` or
    ``class`` of that name (decorators included; the last one when it is defined twice), or
    the whole text when there is none (a lambda, an alias, a conditional ``def``) or the text
    does not parse."""
    text = read_source(path)
    if name is None:
        return text
    import ast

    try:  # ast.parse only reads the text (the runner's guard allows it)
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            found = node
    if found is None:
        return text
    first = min([found.lineno] + [d.lineno for d in found.decorator_list])
    lines = text.splitlines(keepends=True)
    return "".join(lines[first - 1:found.end_lineno])


def solution_namespace(module):
    """The public names of the solution's module and their values (plain data, or handles to
    its functions, classes and objects), read from the module's own namespace in the solution
    process: a module that lies in ``__dir__`` or ``__all__`` changes nothing. Names starting
    with ``_`` and imported modules are left out."""
    if isinstance(module, (SolutionModule, SolutionObject)):
        mark_in_play()
        return module._conn.request("namespace", module)
    import types

    if not isinstance(module, types.ModuleType):
        raise TypeError(f"solution_namespace takes a module, not {type(module).__name__}")
    return {k: v for k, v in list(vars(module).items())
            if type(k) is str and k[:1] != "_" and not isinstance(v, types.ModuleType)}


def consulted():
    """Whether the policy's output has been read yet (its file opened or read, a solution
    process started, its output read): from then on a failure is the answer's own (a judged 0),
    before it the verifier's (no verdict)."""
    return bool(STATE["in_play"])


def run_solution(path, args=(), stdin=None, cwd=None, env=None, timeout=None):
    """Run the solution file as a script; returns a :class:`SolutionRun` (output bounded).
    ``timeout`` (default: the case timeout) counts the script's CPU time, as a
    ``load_solution`` call's limit does (see :func:`_exits_in_time`)."""
    mark_in_play()
    sol_dir = solution_dir()
    target = os.path.join(sol_dir, os.path.basename(path))
    if os.path.abspath(path) != target:
        _copy_in(path, target)
    config = {"mode": "script", "script": target, "args": [str(a) for a in args]}
    proc = spawn(config, cwd or sol_dir, env, (subprocess.PIPE,) * 3)
    out, err = Drain(proc.stdout, MAX_OUTPUT), Drain(proc.stderr, MAX_OUTPUT)
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin or b""), daemon=True)
    feeder.start()
    timed_out = not _exits_in_time(proc, float(timeout or STATE["case_timeout"]))
    kill(proc)
    out.join(1)
    err.join(1)
    code = None if timed_out else proc.returncode
    return SolutionRun(code, out.text(), err.text(), timed_out)


def _exits_in_time(proc, limit):
    """Whether the script exits within ``limit`` counted as a ``load_solution`` call is
    (``deepgym_clock``): in the CPU time of the script and every process it started, with a
    wall-clock bound for a script that waits without computing, from which its waits for a CPU
    are left out. On a machine kept busy by others, a right script is slow, not timed out."""
    bwrap = STATE["launch"].get("kind") == "bwrap" and not getattr(proc, "zygote_child", False)
    clock = CpuClock(None if bwrap else proc.pid, getattr(proc, "cpu_group", None))
    exited, ours = _exit_descriptor(proc)
    try:
        Deadline(clock, limit, TimeoutError).wait(exited)
        return wait_exit(proc, 10)  # it has exited: reaped for its exit code
    except TimeoutError:
        return False
    finally:
        clock.close()
        if ours:
            os.close(exited)


def _exit_descriptor(proc):
    """A descriptor readable once ``proc`` has exited, and whether it is ours to close."""
    pidfd = getattr(proc, "pidfd", None)  # a zygote's child: the zygote handed us its pidfd
    if getattr(proc, "zygote_child", False) and pidfd is not None:
        return pidfd, False
    try:
        return os.pidfd_open(proc.pid), True
    except (AttributeError, OSError):  # no pidfd here: a thread says when it has exited
        read_end, write_end = os.pipe()

        def wait():
            wait_exit(proc, 1e9)
            os.close(write_end)

        threading.Thread(target=wait, daemon=True).start()
        return read_end, True


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
