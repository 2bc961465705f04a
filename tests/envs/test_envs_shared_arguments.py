"""No built-in verifier hands the solution an object that its own check reads afterwards.

The proxy writes a solution's in-place changes back to the verifier's arguments (as a call in
one process would); a verifier whose case arguments share a list with its expected value, its
check or its module would let a wrong answer change what it is judged against (issue 32: an
order that ignores ``topological_order``'s dependencies, after emptying them, passed). Each
built-in verifier runs here in this process, its solution stood in for by the reference
solution behind a boundary that records every argument; then every mutable container an
argument reached is looked for in what the check reads: the case's expected value, the check
function's closure and globals, and the verifier module's globals.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import types
from pathlib import Path

import pytest

from deepgym_ray.envs.registry import builtin_names
from deepgym_ray.judge import deepgym_runner

ENVS = Path(__file__).resolve().parents[2] / "deepgym_ray" / "envs"
JUDGE = ENVS.parent / "judge"
_MUTABLE = (list, dict, set, bytearray)


def _containers(value, found: dict[int, object], depth: int = 0) -> dict[int, object]:
    """Every mutable container reachable from ``value`` through plain data, by identity."""
    if depth > 50:
        return found
    if isinstance(value, _MUTABLE):
        if id(value) in found:
            return found
        found[id(value)] = value
    if isinstance(value, dict):
        for key, item in value.items():
            _containers(key, found, depth + 1)
            _containers(item, found, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _containers(item, found, depth + 1)
    return found


class _Boundary:
    """The reference solution as a verifier sees it, recording every call's arguments."""

    def __init__(self, module: types.ModuleType, sent: list) -> None:
        self._module, self._sent = module, sent

    def __getattr__(self, name: str):
        target = getattr(self._module, name)
        if not callable(target):
            return target

        def call(*args, **kwargs):
            self._sent.append((args, kwargs))
            return target(*args, **kwargs)

        return call


def _judge_module(name: str, fakes: dict[str, types.ModuleType]) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, JUDGE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    with _modules(fakes):
        spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _modules(modules: dict[str, types.ModuleType]):
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _run_verifier(env: str):
    """Run ``env``'s verifier against its reference solution in this process; returns the
    verifier's result, the arguments sent, the cases and checks given to ``score_cases``, and
    the verifier's module namespace."""
    folder = ENVS / env
    sent: list = []

    def load_solution(path, timeout=None):  # (a script's reference reads stdin: only here)
        reference = types.ModuleType("reference_solution")
        exec(compile((folder / "reference_solution.py").read_text(), "reference_solution.py",
                     "exec"), reference.__dict__)
        return _Boundary(reference, sent)

    solution = types.ModuleType("deepgym_solution")
    solution.load_solution = load_solution
    solution.solution_source = lambda path, *a: (folder / "reference_solution.py").read_text()

    def run_solution(path, args=(), stdin=None, **kw):
        sent.append((tuple(args), {"stdin": stdin}))
        raise AssertionError("stood in: script solutions take text only")

    solution.run_solution = run_solution
    proxy = types.ModuleType("deepgym_proxy")
    proxy.function_caller = lambda sol, name: getattr(sol, name)
    proxy.close_solution = lambda sol: None
    cases_module = _judge_module("deepgym_cases", {"deepgym_solution": solution,
                                                   "deepgym_proxy": proxy})
    scored: list = []
    real_score_cases = cases_module.score_cases

    def score_cases(path, function, cases, check=None, **kw):
        cases = list(cases)
        scored.append((cases, check))
        return real_score_cases(path, function, cases, check=check, **kw)

    cases_module.score_cases = score_cases
    source = (folder / "verifier.py").read_text()
    shape = deepgym_runner.detect_shape(source)
    namespace = {"__name__": "__main__" if shape == "script" else "verifier",
                 "__file__": str(folder / "verifier.py")}
    code = deepgym_runner._as_function(source) if shape == "body" else source
    fakes = {"deepgym_solution": solution, "deepgym_proxy": proxy,
             "deepgym_cases": cases_module}
    argv, out = sys.argv, io.StringIO()
    with _modules(fakes), contextlib.redirect_stdout(out):
        sys.argv = ["verifier.py", str(folder / "solution.py"), ""]
        try:
            exec(compile(code, str(folder / "verifier.py"), "exec"), namespace)
            result = namespace["verify"](str(folder / "solution.py")) \
                if "verify" in namespace else out.getvalue()
        except AssertionError as exc:  # a script verifier: its solution runs as a program
            result = f"script: {exc}"
        finally:
            sys.argv = argv
    return result, sent, scored, namespace


def _read_by_check(expected, check, namespace) -> dict[int, object]:
    read: dict[int, object] = {}
    _containers(expected, read)
    for owner in (check, namespace.get("verify")):
        if owner is None:
            continue
        for cell in getattr(owner, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                _containers(cell.cell_contents, read)
    for name, value in namespace.items():
        if not name.startswith("__"):
            _containers(value, read)
    return read


@pytest.mark.parametrize("env", builtin_names())
def test_no_argument_object_is_shared_with_what_the_check_reads(env):
    result, sent, scored, namespace = _run_verifier(env)
    if not sent:
        pytest.fail(f"{env}: the stand-in solution was never called ({result!r})")
    scripted = any("stdin" in kwargs for _, kwargs in sent)
    if not scripted:  # the stand-in is faithful: the reference passes
        score = result.get("score") if isinstance(result, dict) else \
            json.loads(result)["score"] if isinstance(result, str) else result
        assert score == 1.0, (env, result)
    shared = []
    for cases, check in scored:
        for index, case in enumerate(cases):
            args, expected = case[1], case[2]
            given = _containers(args, {})
            read = _read_by_check(expected, check, namespace)
            shared += [f"case {index}: {type(given[i]).__name__} {str(given[i])[:60]}"
                       for i in given.keys() & read.keys()]
    given = {}
    for args, kwargs in sent:
        _containers((args, kwargs), given)
    read = _read_by_check(None, None, namespace)
    shared += [f"module global: {type(given[i]).__name__}" for i in given.keys() & read.keys()]
    assert not shared, f"{env}: the solution is handed objects its check reads: {shared[:5]}"


def test_the_scan_sees_a_shared_argument():
    """The scan itself: the verifier as it was before issue 32 (expected shares the args)."""
    deps = [[0, 1], [1, 2]]
    given = _containers((3, deps), {})
    read = _read_by_check((3, deps, False), None, {})
    assert given.keys() & read.keys()
