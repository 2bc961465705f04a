"""What the runner sets up around the verifier before it runs: checks and hooks on its ways
to the solution.

- :func:`check_runtime_names`: a verifier that uses a name ``deepgym_solution`` does not have
  fails before the answer is in play (the verifier's error, naming the name);
- :func:`install_in_play_hook`: an audit hook that dates the moment the verifier opens the
  solution's file, or reads a session's work directory (the answer is then in play: failures
  after it are the answer's own); :func:`failed_on_work` dates a failure on a path of the work
  directory that came before any read (a ``stat`` of a file the agent did not leave);
- :func:`install_import_guard`: the verifier's own import of the solution file
  (``spec_from_file_location`` on it, or ``import solution``) gets a module that forwards to a
  solution process, so the solution's code never runs in the runner's process.

Example (what the runner does before the verifier runs):
    install_in_play_hook(solution_path, deepgym_spawn)
    install_import_guard(solution_path, deepgym_proxy.load_solution)
"""

import os
import sys

__all__ = ["check_runtime_names", "failed_on_work", "install_import_guard", "install_in_play_hook"]


def install_in_play_hook(solution_path, spawn):
    """Date the moment the verifier touches the solution's file (an ``open`` of it), or, for
    a session's verifier, the agent's work directory (an ``open`` of anything in it, or a
    listing of it)."""
    target = os.path.realpath(solution_path)
    if os.path.isdir(target):
        _install_directory_hook(solution_path, spawn)
        return
    name = os.path.basename(target)

    def hook(event, args):
        if event == "open" and not spawn.STATE["in_play"] and args and isinstance(args[0], str):
            path = args[0]
            try:
                # A path can only lead to the file if it ends in the file's name or in a link
                # (one lstat); only then is it resolved (a stat per component, on every open).
                if ((os.path.basename(path) == name or os.path.islink(path))
                        and os.path.realpath(path) == target):
                    spawn.mark_in_play()
            except (OSError, ValueError):
                pass

    sys.addaudithook(hook)


_READS = frozenset({"open", "os.listdir", "os.scandir"})
_TOPS = []  # a session's work directory as the verifier may name it (set by the hook)


def _install_directory_hook(top, spawn):
    # What the verifier asked for dates it, lexically (a relative path from its current
    # directory, which is the work directory's copy), never where a link would lead: the
    # copy has no links, and the agent must not decide what the first open resolves to.
    _TOPS[:] = sorted({os.path.abspath(top), os.path.realpath(top)})

    def hook(event, args):
        if event in _READS and not spawn.STATE["in_play"] and args \
                and isinstance(args[0], (str, bytes)) and _under_work(args[0]):
            spawn.mark_in_play()

    sys.addaudithook(hook)


def _under_work(path):
    try:
        full = os.path.normpath(os.path.join(os.getcwd(), os.fsdecode(path)))
    except (OSError, ValueError, TypeError):
        return False
    return any(full == top or full.startswith(top.rstrip(os.sep) + os.sep) for top in _TOPS)


def failed_on_work(exc):
    """Whether ``exc`` (or an exception it came from) is an OSError naming a path under a
    session's work directory: the verifier failed while handling the agent's work, whether or
    not it got as far as an open (``os.stat`` has no audit event)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and any(
                isinstance(name, (str, bytes)) and _under_work(name)
                for name in (exc.filename, exc.filename2)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def install_import_guard(solution_path, load_solution):
    """A verifier that imports the solution file itself gets a proxy module instead.

    Verifiers written for the product sometimes load the solution with
    ``importlib.util.spec_from_file_location`` or a plain ``import solution``; running it in
    this process would let it see the token, so the spec is swapped for one whose module
    forwards to a solution process.
    """
    import importlib.machinery
    import importlib.util
    import types

    target = os.path.realpath(solution_path)
    original = importlib.util.spec_from_file_location

    class _ProxyModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            proxy = self.__dict__.get("_deepgym_proxy")
            if proxy is None:
                raise AttributeError(name)
            return getattr(proxy, name)

    class _Loader:
        def create_module(self, spec):
            return _ProxyModule(spec.name)

        def exec_module(self, module):
            module.__file__ = solution_path
            module._deepgym_proxy = load_solution(solution_path)

    def spec_from_file_location(name, location=None, *args, **kwargs):
        try:
            if location is not None and os.path.realpath(os.fspath(location)) == target:
                return importlib.machinery.ModuleSpec(name, _Loader(), origin=solution_path)
        except (TypeError, ValueError, OSError):
            pass
        return original(name, location, *args, **kwargs)

    importlib.util.spec_from_file_location = spec_from_file_location
    stem = os.path.splitext(os.path.basename(solution_path))[0]

    class _Finder:
        """``import solution`` (the solution's folder on sys.path) gets the proxy too."""

        @staticmethod
        def find_spec(name, path=None, target_module=None):
            if name.rpartition(".")[2] != stem:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.origin and os.path.realpath(spec.origin) == target:
                return importlib.machinery.ModuleSpec(name, _Loader(), origin=solution_path)
            return None

    sys.meta_path.insert(0, _Finder)


def check_runtime_names(source, failure):
    """Refuse, before the answer is in play, a verifier that imports (or reads as an attribute)
    a name ``deepgym_solution`` does not have: wherever the import stands, the run is the
    verifier's error naming the name, not a judged 0 for every answer."""
    if "deepgym_solution" not in source:
        return
    import ast

    import deepgym_solution  # (in a sandbox: the judge's files side by side)

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # reported when it runs
    # A use inside ``try`` that handles its failure is the verifier's own feature test.
    guarded = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.Try)
               and any(_handles_missing(h.type) for h in node.handlers)
               for inner in node.body for sub in ast.walk(inner)}
    aliases, missing = set(), []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "deepgym_solution" \
                and not node.level:
            missing += [a.name for a in node.names if a.name != "*"
                        and not hasattr(deepgym_solution, a.name)]
        elif isinstance(node, ast.Import):
            aliases.update(a.asname or a.name for a in node.names
                           if a.name == "deepgym_solution")
    uses = [node for node in ast.walk(tree) if aliases and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id in aliases]
    stored = {node.attr for node in uses if not isinstance(node.ctx, ast.Load)}  # its own
    missing += [node.attr for node in uses if node.attr not in stored and id(node) not in guarded
                and not hasattr(deepgym_solution, node.attr)]
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        raise failure(f"the verifier uses {names} from deepgym_solution, which the verifier "
                      "runtime does not have (it has: " + ", ".join(deepgym_solution.__all__)
                      + ")")


def _handles_missing(kind):
    import ast

    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return kind is None or any(isinstance(n, ast.Name) and n.id in _MISSING_CAUGHT for n in names)


_MISSING_CAUGHT = frozenset({"ImportError", "AttributeError", "Exception", "BaseException"})
