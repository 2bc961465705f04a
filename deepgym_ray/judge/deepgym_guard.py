"""Keeps the solution's code out of the runner's process (stdlib only).

Whatever runs in the runner's process can take what the runner holds: its result channel and
its token. So the solution's code runs only in solution processes (``load_solution``,
``run_solution``), and a verifier that would run it here itself (``exec(open(path).read())``,
``runpy.run_path``, a loader or an ``import`` of the file, a tree of its text compiled, a
``.pyc`` the solution left) is refused by an audit hook, which nothing can remove. A refusal is
raised where the code would have been made (:class:`SolutionCodeRefused`, a ``BaseException``,
so ``except Exception`` does not hide it) and recorded: the runner then reports the verifier's
error without a verdict, naming ``load_solution`` as the fix, whatever the verifier did next.

What counts as the solution's code:
- its files: the solution file, anything under the solution processes' directory, anything
  owned by their uid; compiled, read as a ``.pyc``, run as a code object, imported (any import
  while such a directory is on ``sys.path``) or loaded by ``ctypes``;
- its text, in any source compiled here except the runner's own verifier, the judge's and the
  standard library's files and files the host put in the work directory, as
  ``deepgym_taint.SolutionText`` finds it (all of it, two consecutive lines, one long line);
- a tree (``ast``) compiled to code whose source (``ast.unparse``) holds it the same way;
- text a solution process sent or printed (``deepgym_taint``): ``eval`` of its output.
``ast.parse`` of the solution's text stays allowed: static checks are the verifier's business.
Also refused: a command (``subprocess``, ``os.system``, ``os.posix_spawn``, ``os.exec*``) that
runs the solution's file with a Python interpreter or pytest, which would run it with the
verifier's own rights outside the solution's sandbox; and replacing the runner's process
(``os.exec*``) or libc's process-ending functions through ``ctypes``, which would end the run
without its result.

Example (what the runner does before the verifier runs):
    guard = install("solution.py", "/tmp/sol", 1234, "verifier.py", None)
    with guard.trusted():
        code = compile(verifier_source, "verifier.py", "exec")
    ...
    guard.refusal()  # None, or what the verifier tried, with the fix
"""

import contextlib
import os
import re
import sys
import threading
import time

try:  # on the host (tests)
    from deepgym_ray.judge.deepgym_taint import OwnText, SolutionText, as_text
except ImportError:  # in a sandbox: the judge files side by side
    from deepgym_taint import OwnText, SolutionText, as_text

__all__ = ["FIX", "Guard", "SolutionCodeRefused", "install"]

FIX = ("use load_solution(solution_path) from deepgym_solution to call the solution (or "
       "run_solution to run it as a script): its code runs only in a solution process; "
       "reading its text, or ast.parse of it, for static checks is fine")
_JUDGE = re.compile(r"deepgym_\w+\.py\Z")
_PYTHON = re.compile(r"(?:python[\d.]*|pytest|py\.test)\Z")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_LIBC_EXITS = frozenset({"_exit", "_Exit", "exit", "quick_exit", "abort", "kill", "killpg",
                         "raise", "tgkill", "tkill", "pthread_kill", "syscall", "execve",
                         "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve"})


class SolutionCodeRefused(BaseException):
    """The verifier tried to run the solution's code in the runner's process."""


class Guard:
    """The audit hook and what it knows; see the module docstring."""

    def __init__(self, solution, solution_dir, uid, verifier, tests):
        self.solution = os.path.realpath(solution)
        # A session's solution is a directory (the copy of the agent's work): all of it is the
        # agent's, as everything under the solution processes' directory is.
        folders = [solution_dir, solution if os.path.isdir(solution) else None]
        self.dirs = tuple(d.rstrip(os.sep) + os.sep for d in folders if d)
        self._real_dirs = False  # their real paths are added once first needed
        self.uid = uid if uid is not None and uid != os.getuid() else None
        self.own = (verifier, tests)
        self.work = os.getcwd() + os.sep
        self.stdlib = os.path.dirname(os.__file__) + os.sep
        self.here = os.path.dirname(os.path.abspath(__file__)) + os.sep
        # Places no solution process can write to: what is found there is kept.
        self.stable = (os.path.dirname(os.path.dirname(os.__file__)) + os.sep, self.work,
                       self.here)
        self.started = time.time_ns()
        self.pid = os.getpid()
        self.made = set()  # files this process wrote: never trusted as the host's
        # path -> is it the solution's (stable places only); the runner's own verifier is not
        self.known = {verifier: False, os.path.abspath(verifier): False}
        self.prints = {}  # "text" / "tree" -> SolutionText of the solution's file
        self.own_text = OwnText((verifier, tests))  # for the exclusions
        self.refusals = []
        self.produced = None  # what solution processes sent (deepgym_taint), once watched
        self.local = threading.local()
        self.handlers = {"compile": self._compile, "exec": self._exec, "open": self._open,
                         "import": self._import, "ctypes.dlopen": self._dlopen,
                         "ctypes.dlsym": self._dlsym, "ctypes.dlsym/handle": self._dlsym,
                         "os.exec": self._os_exec, "subprocess.Popen": self._popen,
                         "os.posix_spawn": self._popen, "os.system": self._system,
                         "os.rename": self._moved,
                         "os.link": self._moved, "os.symlink": self._moved}

    def hook(self, event, args):
        handler = self.handlers.get(event)
        if handler is not None and not getattr(self.local, "busy", False):
            handler(args)

    @contextlib.contextmanager
    def trusted(self):
        """The runner's own compiling (the verifier's source) is not checked."""
        self.local.busy = True
        try:
            yield
        finally:
            self.local.busy = False

    def refusal(self):
        """None, or the first refusal's message (the run's verifier error)."""
        return self.refusals[0] if self.refusals else None

    def refuse(self, what, fix=FIX):
        message = f"the verifier {what} in the judge's own process; refused: {fix}"
        if os.getpid() == self.pid:
            self.refusals.append(message)
        raise SolutionCodeRefused(message)

    # -- files ---------------------------------------------------------------------------------

    def theirs(self, path):
        """Is ``path`` the solution's file or one its processes may have written?"""
        try:
            path = os.fsdecode(path)
        except TypeError:
            return False
        if not path or path[0] == "<":
            return False
        found = self.known.get(path)
        if found is not None:
            return found
        full = os.path.abspath(path)
        real = os.path.realpath(full)
        if not self._real_dirs:  # the directories' real paths too, once needed
            self._real_dirs = True
            self.dirs += tuple(os.path.realpath(d).rstrip(os.sep) + os.sep for d in self.dirs)
        found = real == self.solution or any((p + os.sep).startswith(d)
                                             for p in (full, real) for d in self.dirs)
        if not found and self.uid is not None:
            for p in (full, real):
                try:
                    found = found or os.lstat(p).st_uid == self.uid
                except (OSError, ValueError):
                    pass
        if found or (full + os.sep).startswith(self.stable) \
                and (real + os.sep).startswith(self.stable):
            self.known[path] = found  # no solution process can write to these places
        return found

    def _host_file(self, path, source):
        """Is ``source`` a judge or standard library file, or one the host put in the work
        directory (there before the run began, and what is compiled is what it holds)?"""
        try:
            full = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        if full in self.made or full == self.solution:
            return False
        if full.startswith(self.stdlib) or _JUDGE.match(os.fsdecode(path)) \
                or full.startswith(self.here) and _JUDGE.match(os.path.basename(full)):
            return True  # (a judge module may be compiled by its plain name)
        if not full.startswith(self.work):
            return False
        self.local.busy = True
        try:
            if os.stat(full).st_ctime_ns >= self.started:
                return False
            with open(full, "rb") as f:
                held = f.read()
            return held == (source.encode("utf-8") if isinstance(source, str) else source)
        except (OSError, UnicodeError):
            return False
        finally:
            self.local.busy = False

    # -- the events ----------------------------------------------------------------------------

    def _compile(self, args):
        source, filename = args[0], args[1]
        # Who called compile(): ast.parse only reads the text; dataclasses and namedtuple
        # write code from the verifier's own field names (which common code may share).
        try:
            caller = sys._getframe(2).f_code
        except ValueError:  # compiled with no Python caller at all
            caller = None
        if caller is not None and (caller.co_name, caller.co_filename) in _readers():
            return
        if isinstance(source, (str, bytes, bytearray)):
            if filename is not None and self.theirs(filename):
                self.refuse(f"compiled the solution's file ({os.fsdecode(filename)})")
            if filename is not None and self._host_file(filename, source):
                return
            text = as_text(source)
            if self._holds(text, "text"):
                self.refuse("compiled the solution's text (exec, eval or compile of it)")
            if self.produced is not None and self.produced.holds(text, self._own):
                self.refuse("compiled text the solution sent or printed (eval or exec of its "
                            "output)", FIX + "; read a value it printed or returned with "
                            "ast.literal_eval or json.loads")
        elif type(source).__module__ == "ast":
            try:
                text = sys.modules["ast"].unparse(source)
            except Exception:  # noqa: BLE001 - a tree it cannot write back is not the solution's
                return
            if self._holds(text, "tree"):
                self.refuse("compiled a tree of the solution's text (ast.parse, then compile)")

    def _exec(self, args):
        code = args[0]
        filename = getattr(code, "co_filename", None)
        if isinstance(filename, str) and filename[:1] != "<" and self.theirs(filename):
            self.refuse(f"ran the solution's code ({filename})")

    def _open(self, args):
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(path, int):
            return
        if (isinstance(mode, str) and mode.strip("rbtU")) \
                or (mode is None and isinstance(flags, int) and flags & _WRITES):
            self._moved((None, path))
            return
        try:
            name = os.fsdecode(path)
        except TypeError:
            return
        if name.endswith((".pyc", ".pyo")) and self.theirs(name):
            self.refuse(f"read compiled code the solution left ({name})")

    def _moved(self, args):
        try:
            self.made.add(os.path.realpath(os.fsdecode(args[1])))
        except (TypeError, ValueError):
            pass

    def _import(self, args):
        module, filename, path = args[0], args[1], args[2]
        if filename is not None and self.theirs(filename):
            self.refuse(f"loaded the solution's extension module ({os.fsdecode(filename)})")
        for entry in path or ():
            if isinstance(entry, (str, bytes)) and self.theirs(entry):
                self.refuse(f"imported {module!r} with the solution's directory "
                            f"({os.fsdecode(entry)}) on sys.path")

    def _dlopen(self, args):
        if args and args[0] is not None and self.theirs(args[0]):
            self.refuse(f"loaded the solution's library ({os.fsdecode(args[0])}) with ctypes")

    def _dlsym(self, args):
        if os.getpid() == self.pid and args[-1] in _LIBC_EXITS:
            self.refuse(f"looked up libc's {args[-1]} with ctypes", "it would end or replace the "
                        "process without its result; use sys.exit, or subprocess")

    def _os_exec(self, args):
        self._popen(args)
        if os.getpid() == self.pid:
            self.refuse("replaced the process (os.exec*)", "the run would end without its "
                        "result; use subprocess")

    def _popen(self, args):
        program, argv = args[0], args[1]
        words = [program] + list(argv) if isinstance(argv, (list, tuple)) else [program, argv]
        # A word longer than a path can be is no file (a worker's code, its settings).
        self._command([w for w in words if isinstance(w, (str, bytes)) and len(w) <= 4096])

    def _system(self, args):
        self._command(["/bin/sh", "-c", args[0]])

    def _command(self, words):
        """Refuse a command that runs the solution's file with a Python interpreter (or
        pytest): that would run it with the verifier's own rights, outside its sandbox."""
        words = [os.fsdecode(w) for w in words]
        line = "\0".join(words)
        if ".py" not in line and not any(d[:-1] in line for d in self.dirs) \
                and os.path.basename(self.solution) not in line:
            return  # names no Python file and nothing of the solution's (a worker's start)
        if len(words) >= 3 and os.path.basename(words[0]) in _SHELLS and "-c" in words:
            import shlex  # only for a shell's command line

            try:
                words = shlex.split(words[words.index("-c") + 1])
            except (ValueError, IndexError):
                words = " ".join(words).split()
        for i, word in enumerate(words):
            name = os.path.basename(word)
            if not _PYTHON.match(name):
                continue
            for arg in words[i + 1:]:  # the script run (pytest: every file named)
                if arg in ("-c", "-m"):
                    break
                if arg[:1] == "-" or len(arg) > 4096:
                    continue
                if self.theirs(arg):
                    self.refuse(f"ran the solution's file as a program ({' '.join(words)[:200]}),"
                                " with its own rights, outside the solution's sandbox")
                if name.startswith("python"):
                    break

    # -- text ----------------------------------------------------------------------------------

    def _holds(self, text, kind):
        """Does ``text`` hold the solution's code (see ``deepgym_taint.SolutionText``)?"""
        if kind not in self.prints:
            self.local.busy = True  # this reading and parsing is the guard's own
            try:
                self.prints[kind] = SolutionText.of_file(self.solution, tree=kind == "tree")
            finally:
                self.local.busy = False
        fingerprint = self.prints[kind]
        return fingerprint is not None and fingerprint.found_in(text, self._own)

    def own_code(self, code):
        """The verifier's compiled code: its string constants are its own text too (a prompt
        it embeds and runs, as HumanEval's verifiers do, whatever the answer repeats of it)."""
        self.own_text.code = code

    def _own(self, piece):
        self.local.busy = True  # reading the verifier's files is the guard's own
        try:
            return self.own_text(piece)
        finally:
            self.local.busy = False


_READERS = [frozenset(), 0]  # what _readers found, and how many of the modules were loaded


def _readers():
    """(function, file) of the standard library's callers of compile that run no text of
    the solution: ast.parse, and the code dataclasses and namedtuple write."""
    modules = (("ast", "parse"), ("dataclasses", "_create_fn"), ("collections", "namedtuple"))
    files = [getattr(sys.modules.get(module), "__file__", None) for module, _ in modules]
    loaded = sum(file is not None for file in files)
    if loaded != _READERS[1]:
        _READERS[:] = [frozenset((name, file) for (_, name), file in zip(modules, files,
                                                                       strict=True) if file),
                       loaded]
    return _READERS[0]


def install(solution, solution_dir, uid, verifier, tests):
    """Install the guard for this process (before any verifier code runs); returns it."""
    guard = Guard(solution, solution_dir, uid, verifier, tests)
    sys.addaudithook(guard.hook)
    return guard
