"""Case-by-case scoring for verifiers: the loop most verifiers would write, written once
(stdlib only; copied into every sandbox next to ``deepgym_solution.py``).

A verifier lists its cases as ``(case_id, args, expected)`` (optionally a fourth item: a dict of
fields to report with that case) and names the solution's function; :func:`score_cases` loads
the solution, calls the function once per case, compares with :func:`strict_equal` (or the
verifier's own ``check``) and returns the verifier's result dict: ``score`` (the fraction of
cases passed), ``passed``, ``details`` (``"k/n cases passed"``), ``cases`` and, when given,
``reward_components``.

What a case's failure says (``error``, at most :data:`NOTE_LIMIT` characters): the exception the
call raised, ``timed out: ...`` when the call ran past its time, what ``check`` said was wrong,
or ``could not load the solution: ...`` on every case when the solution does not even load.
After a timeout the remaining cases fail at once as :data:`SKIPPED` (``stop_after_timeout``),
so an answer that hangs costs one case's time, not the whole run's.

Example (a whole ``verify`` module):
    from deepgym_cases import score_cases

    CASES = [("example", ([1, 2, 5], 11), 3), ("impossible", ([2], 3), -1)]

    def verify(solution_path, test_cases_path=None):
        return score_cases(solution_path, "coin_change", CASES)
"""

import builtins
import math
import reprlib

from deepgym_proxy import close_solution, function_caller
from deepgym_solution import load_solution

__all__ = [
    "NOTE_LIMIT",
    "SKIPPED",
    "call_named",
    "pass_rate",
    "run_cases",
    "score_cases",
    "strict_equal",
    "summarize",
]

NOTE_LIMIT = 200  # characters of a case's ``error``
SKIPPED = "skipped: an earlier case timed out"

# Bounded reprs for notes: a 20,000-item answer or a deeply nested one costs nothing to show.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 8


def score_cases(solution_path, function, cases, check=None, timeout=None,
                stop_after_timeout=True, extra=None, reward_components=None):
    """Load the solution at ``solution_path`` and score it on ``cases``; returns the result dict.

    ``function`` is the name of the solution's function, called as ``function(*args)``, or a
    callable ``function(solution, *args)`` for anything else (another function per case, say).
    ``args`` is a tuple of positional arguments; any other value is the single argument.
    ``check(got, expected)`` returns True to pass the case, or False or a text saying what is
    wrong to fail it (default :func:`strict_equal`). ``timeout`` bounds each call (default: the
    environment's ``case_timeout``). ``extra`` is a dict of fields added to every case record;
    ``reward_components`` goes into the result as given (a dict), or is called with the case
    records to make one.

    Example:
        score_cases("solution.py", "add", [("one", (1, 2), 3)])
        # {'score': 1.0, 'passed': True, 'details': '1/1 cases passed', 'cases': [...]}
    """
    cases = list(cases)
    try:
        solution = load_solution(solution_path, timeout=timeout)
    except Exception as exc:  # an answer that cannot even load fails every case
        note = _bounded("could not load the solution: " + _error_text(exc))
        records = [_record(_unpack(case, i), False, note, extra) for i, case in enumerate(cases)]
        return summarize(records, reward_components)
    if isinstance(function, str):
        name, call = function, function_caller(solution, function)
    else:
        name = None

        def call(*args):
            return function(solution, *args)

    try:
        records = run_cases(call, cases, check, stop_after_timeout=stop_after_timeout,
                            extra=extra, name=name)
    finally:
        close_solution(solution)  # its process is not needed any more; free the sandbox's room now
    return summarize(records, reward_components)


def call_named(solution, function, *args):
    """For ``score_cases``'s ``function`` when each case calls its own function: the case's
    args start with that function's name, as in ``("to_roman_4", ("to_roman", 4), "IV")``."""
    return getattr(solution, function)(*args)


def run_cases(call, cases, check=None, *, stop_after_timeout=True, extra=None, name=None):
    """Run ``call(*args)`` on every case and return the case records (``id``, ``passed``,
    ``score``, the case's own fields, ``error``), in the cases' order.

    For verifiers that reach the solution some other way (``run_solution``, say): ``call``
    raises ``TimeoutError`` to say the case ran out of time. ``name`` prefixes the default
    failure note, as in ``name(args): expected ..., got ...``.

    Example:
        >>> [r["passed"] for r in run_cases(abs, [("a", (-2,), 2), ("b", (3,), -3)])]
        [True, False]
    """
    check = strict_equal if check is None else check
    records, timed_out = [], False
    for index, case in enumerate(cases):
        parts = _unpack(case, index)
        _, args, expected, _ = parts
        if timed_out:
            records.append(_record(parts, False, SKIPPED, extra))
            continue
        try:
            got = call(*args)
        except Exception as exc:
            if _is_timeout(exc):
                timed_out = stop_after_timeout
                note = f"timed out: {exc}" if str(exc) else "timed out"
            else:
                note = _error_text(exc)
            records.append(_record(parts, False, _bounded(note), extra))
            continue
        try:
            verdict = check(got, expected)
        except Exception as exc:  # the check choking on a strange answer fails the case
            verdict = _error_text(exc)
        ok = verdict is True
        if ok:
            note = ""
        elif isinstance(verdict, str) and verdict:
            note = verdict
        else:
            shown = f"{name}({_show_args(args)}): " if name else ""
            note = f"{shown}expected {_SHORT.repr(expected)}, got {_SHORT.repr(got)}"
        records.append(_record(parts, ok, _bounded(note), extra))
    return records


def summarize(records, reward_components=None):
    """The verifier's result dict for a list of case records (score = fraction passed).

    Example:
        >>> summarize([{"id": "a", "passed": True}, {"id": "b", "passed": False}])["details"]
        '1/2 cases passed'
    """
    records = list(records)
    if not records:
        raise ValueError("no cases to score: a verifier needs at least one case")
    n_passed = sum(1 for record in records if record.get("passed") is True)
    result = {
        "score": n_passed / len(records),
        "passed": n_passed == len(records),
        "details": f"{n_passed}/{len(records)} cases passed",
    }
    if reward_components is not None:
        if callable(reward_components):
            reward_components = reward_components(records)
        result["reward_components"] = dict(reward_components)
    result["cases"] = records
    return result


def pass_rate(records, **where):
    """The fraction passed among the records whose fields equal ``where``.

    Example:
        >>> pass_rate([{"kind": "a", "passed": True}, {"kind": "b", "passed": False}], kind="a")
        1.0
    """
    chosen = [r for r in records if all(r.get(key) == value for key, value in where.items())]
    if not chosen:
        raise ValueError(f"no case has {where}")
    return sum(1 for r in chosen if r.get("passed") is True) / len(chosen)


def strict_equal(got, expected, rel_tol=0.0, abs_tol=0.0):
    """True when ``got`` equals ``expected`` with exactly its types, all the way down.

    Lists, tuples, dicts, sets, ints, floats, strs, bools, bytes and None are compared item by
    item with ``type(got) is type(expected)``, so ``True`` is not ``1``, a subclass is not its
    base and an object whose ``__eq__`` says yes to everything never passes. Floats compare
    exactly unless ``rel_tol`` or ``abs_tol`` is given (then :func:`math.isclose`); NaN equals
    NaN. Any other type must match exactly and then its own ``==`` decides.

    Example:
        >>> strict_equal([1, 2.0], [1, 2.0]), strict_equal([True], [1]), strict_equal(0.3, 0.1 * 3)
        (True, False, False)
        >>> strict_equal(0.1 * 3, 0.3, rel_tol=1e-9)
        True
    """
    try:
        return _equal(got, expected, rel_tol, abs_tol)
    except Exception:  # too deep, an unhashable key, an == that raises: not a match
        return False


def _equal(got, expected, rel_tol, abs_tol):
    kind = type(expected)
    if type(got) is not kind:
        return False
    if kind is float:
        if math.isnan(expected):
            return math.isnan(got)
        if rel_tol or abs_tol:
            return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)
        return got == expected
    if kind is list or kind is tuple:
        return len(got) == len(expected) and all(
            _equal(g, e, rel_tol, abs_tol) for g, e in zip(got, expected, strict=False))
    if kind is dict:
        if len(got) != len(expected):
            return False
        by_key = {_key(k): v for k, v in got.items()}
        for k, value in expected.items():
            key = _key(k)
            if key not in by_key or not _equal(by_key[key], value, rel_tol, abs_tol):
                return False
        return True
    if kind is set or kind is frozenset:
        return len(got) == len(expected) and {_key(x) for x in got} == {_key(x) for x in expected}
    return bool(got == expected)  # same exact type (int, str, bytes, None, ...): its own ==


def _key(value):
    """A hashable stand-in for a dict key or set item that keeps its exact type (1 != True)."""
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return kind, kind(_key(item) for item in value)
    return kind, value


def _is_timeout(exc):
    # The solution proxy's per-call timeout is a builtin TimeoutError tagged "timeout"; the same
    # type raised by the solution's own code arrives tagged "error" and is an ordinary failure.
    return (isinstance(exc, builtins.TimeoutError)
            and getattr(exc, "_deepgym_origin", "timeout") == "timeout")


def _unpack(case, index):
    size = len(case) if type(case) in (tuple, list) else 0
    if size not in (3, 4) or (size == 4 and not isinstance(case[3], dict)):
        raise ValueError(f"case {index}: expected (case_id, args, expected[, fields dict]), "
                         f"got {_SHORT.repr(case)}")
    args = case[1] if type(case[1]) is tuple else (case[1],)
    return case[0], args, case[2], case[3] if size == 4 else {}


def _record(parts, ok, note, extra):
    case_id, _, _, fields = parts
    record = {"id": str(case_id), "passed": ok, "score": 1.0 if ok else 0.0}
    record.update(extra or {})
    record.update(fields)
    record["error"] = note
    return record


def _show_args(args):
    return ", ".join(_SHORT.repr(arg) for arg in args)


def _error_text(exc):
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # a message that cannot be shown still names the failure
        return type(exc).__name__


def _bounded(text):
    return text if len(text) <= NOTE_LIMIT else text[: NOTE_LIMIT - 3] + "..."
