"""deepgym_cases, the verifiers' case-by-case scoring helper: on its own and through the judge."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "deepgym_ray/judge"))
import deepgym_cases  # noqa: E402 - the stdlib-only module lives in the judge folder
from deepgym_cases import (  # noqa: E402
    SKIPPED,
    pass_rate,
    run_cases,
    strict_equal,
    summarize,
)
from deepgym_wire import OpaqueValue, tag  # noqa: E402

from deepgym_ray.client import DeepGym  # noqa: E402
from deepgym_ray.judge import sandbox_judge_files  # noqa: E402
from deepgym_ray.models import Environment  # noqa: E402


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class SneakyList(list):
    def __eq__(self, other):
        return True

    __hash__ = None


class SneakyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


# --- strict_equal --------------------------------------------------------------------------

@pytest.mark.parametrize("expected", [3, "x", [1, 2], {"a": 1}, (1,), 2.5, None, True, {1}])
@pytest.mark.parametrize("got", [AlwaysEqual(), SneakyList([1, 2]), SneakyInt(3),
                                 OpaqueValue("<thing>")])
def test_objects_that_claim_equality_never_pass(got, expected):
    assert got == expected or isinstance(got, OpaqueValue)  # they do lie (but the opaque one)
    assert strict_equal(got, expected) is False


@pytest.mark.parametrize("got, expected", [
    (True, 1), (1, True), (1.0, 1), (1, 1.0), ("1", 1), ((1, 2), [1, 2]), ([1, 2], (1, 2)),
    ([[1, 2]], [[1, True]]), ({"a": 1}, {"a": 1.0}), ({1: "x"}, {True: "x"}), ({1}, {True}),
    (frozenset({1}), {1}), ({"a": 1, "b": 2}, {"a": 1}), ([1, 2, 3], [1, 2]), (b"x", "x"),
    (None, 0), (0.1 * 3, 0.3), ([AlwaysEqual()], [1]), ({"k": AlwaysEqual()}, {"k": [1]}),
])
def test_strict_mismatches(got, expected):
    assert strict_equal(got, expected) is False


@pytest.mark.parametrize("value", [
    3, -0, 10**40, "text", "", b"raw", None, True, False, 2.5, [], [1, [2, [3, "x"]]], (1, (2,)),
    {"a": [1, {"b": (2, 3)}]}, {(1, "t"): None}, {1, 2, "x"}, frozenset({(1, 2)}), float("nan"),
    [float("inf"), -0.0],
])
def test_strict_matches_equal_plain_data(value):
    assert strict_equal(value, value) is True
    assert strict_equal(_copy(value), value) is True


def _copy(value):
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(_copy(item) for item in value)
    if type(value) is dict:
        return {_copy(k): _copy(v) for k, v in value.items()}
    return value


def test_float_tolerance_is_opt_in_and_still_typed():
    assert strict_equal(0.1 * 3, 0.3, rel_tol=1e-9)
    assert strict_equal([1.0, 2.0000001], [1.0, 2.0], abs_tol=1e-6)
    assert not strict_equal(2.1, 2.0, abs_tol=1e-6)
    assert not strict_equal(2, 2.0, abs_tol=1.0)  # an int is not a float, however close
    assert strict_equal(float("nan"), math.nan) and not strict_equal(1.0, math.nan)


def test_deep_nesting_is_a_mismatch_not_a_crash():
    deep_a, deep_b = [], []
    for _ in range(100_000):
        deep_a, deep_b = [deep_a], [deep_b]
    assert strict_equal(deep_a, deep_b) is False


# --- run_cases, summarize, pass_rate ------------------------------------------------------

def _proxy_timeout():
    return tag(TimeoutError("the solution did not answer within 1s"), "timeout")


def test_a_timeout_skips_the_remaining_cases():
    calls = []

    def call(x):
        calls.append(x)
        if x == 2:
            raise _proxy_timeout()
        return x * 10

    cases = [(f"c{x}", (x,), x * 10) for x in range(5)]
    records = run_cases(call, cases)
    assert calls == [0, 1, 2]  # nothing was run after the timeout
    assert [r["passed"] for r in records] == [True, True, False, False, False]
    assert records[2]["error"].startswith("timed out: the solution did not answer")
    assert [r["error"] for r in records[3:]] == [SKIPPED, SKIPPED]

    calls.clear()
    records = run_cases(call, cases, stop_after_timeout=False)
    assert calls == [0, 1, 2, 3, 4]
    assert [r["passed"] for r in records] == [True, True, False, True, True]


def test_a_timeout_error_raised_by_the_solution_itself_is_an_ordinary_failure():
    def call(x):
        if x == 0:
            raise tag(TimeoutError("my own"), "error")  # how the proxy relays the solution's
        return x

    records = run_cases(call, [("a", (0,), 0), ("b", (1,), 1)])
    assert records[0]["error"] == "TimeoutError: my own"
    assert records[1]["passed"] is True


def test_failure_notes_say_what_went_wrong_and_are_bounded():
    def call(x):
        if x == "boom":
            raise ValueError("bad " * 200)
        return [x] * 10_000

    def check(got, expected):
        if expected == "complain":
            return "too short"
        if expected == "crash":
            raise KeyError("inside the check")
        return got == expected

    cases = [("boom", ("boom",), 1), ("wrong", ("x",), [1]), ("said", ("y",), "complain"),
             ("crash", ("z",), "crash")]
    records = run_cases(call, cases, check, name="f")
    notes = [r["error"] for r in records]
    assert notes[0].startswith("ValueError: bad bad") and len(notes[0]) <= deepgym_cases.NOTE_LIMIT
    assert notes[1].startswith("f('x'): expected [1], got ['x', 'x'")
    assert len(notes[1]) <= deepgym_cases.NOTE_LIMIT
    assert notes[2] == "too short"
    assert notes[3] == "KeyError: 'inside the check'"
    assert not any(r["passed"] for r in records)


def test_only_true_from_a_check_passes():
    records = run_cases(lambda x: x, [("a", (1,), 1), ("b", (2,), 2), ("c", (3,), 3)],
                        check=lambda got, expected: {1: True, 2: 1, 3: "yes"}[got])
    assert [r["passed"] for r in records] == [True, False, False]


def test_case_fields_extra_fields_and_single_arguments():
    records = run_cases(len, [("a", [1, 2], 2, {"kind": "list"}), ("b", ("abc",), 3)],
                        extra={"timeout": 2.0})
    assert records == [
        {"id": "a", "passed": True, "score": 1.0, "timeout": 2.0, "kind": "list", "error": ""},
        {"id": "b", "passed": True, "score": 1.0, "timeout": 2.0, "error": ""},
    ]


def test_summary_and_reward_components():
    records = [{"id": "a", "passed": True, "kind": "x"}, {"id": "b", "passed": False, "kind": "y"},
               {"id": "c", "passed": True, "kind": "y"}]
    result = summarize(records, reward_components={"style": 0.5})
    assert result["score"] == pytest.approx(2 / 3) and result["passed"] is False
    assert result["details"] == "2/3 cases passed" and result["reward_components"] == {
        "style": 0.5}
    made = summarize(records, reward_components=lambda rs: {"y": pass_rate(rs, kind="y")})
    assert made["reward_components"] == {"y": 0.5}
    assert "reward_components" not in summarize(records)
    assert summarize(records[:1])["passed"] is True
    with pytest.raises(ValueError, match="no cases"):
        summarize([])
    with pytest.raises(ValueError, match="no case has"):
        pass_rate(records, kind="z")


@pytest.mark.parametrize("case", [("a", (1,)), ("a", (1,), 1, "fields"), "abc", 5])
def test_malformed_cases_are_clear_errors(case):
    with pytest.raises(ValueError, match="case 0: expected"):
        run_cases(abs, [case])


def test_the_module_ships_into_every_sandbox():
    files = sandbox_judge_files()
    assert files["deepgym_cases.py"] == Path(deepgym_cases.__file__).read_bytes()


# --- through the real judge ---------------------------------------------------------------

_VERIFIER = '''
from deepgym_cases import score_cases

def verify(solution_path, test_cases_path=None):
    cases = [(f"case_{x}", (x,), x * x) for x in range(5)]
    return score_cases(solution_path, "square", cases, stop_after_timeout=STOP,
                       reward_components={"correctness": 1.0})
'''

_ANSWERS = {
    "right": "def square(x):\n    return x * x\n",
    "hangs": "def square(x):\n    while True:\n        pass\n",
    "hangs_on_zero": "def square(x):\n    while x == 0:\n        pass\n    return x * x\n",
    "raises_on_import": "raise RuntimeError('not today')\n",
    "syntax_error": "def square(x:\n",
    "bool_and_float": "def square(x):\n    return True if x == 1 else float(x * x)\n",
    "own_timeout": "def square(x):\n    if x == 0:\n        raise TimeoutError('mine')\n"
                   "    return x * x\n",
}


@pytest.fixture(scope="module")
def judged():
    """{(stop_after_timeout, answer name): RunResult}, one batch through the local sandbox."""
    envs = {stop: Environment(name=f"cases_stop_{stop}".lower(), timeout=30, case_timeout=1,
                              verifier_code=_VERIFIER.replace("STOP", str(stop)))
            for stop in (True, False)}
    keys = [(True, name) for name in _ANSWERS] + [(False, "hangs_on_zero")]
    client = DeepGym(mode="local", backend="threads")
    try:
        batch = client.eval([envs[stop] for stop, _ in keys],
                            [_ANSWERS[name] for _, name in keys], max_parallel=4)
    finally:
        client.close()
    return dict(zip(keys, batch.results, strict=True))


def _errors(result):
    return [case.model_dump().get("error") for case in result.cases]


def test_a_right_answer_passes_every_case(judged):
    result = judged[True, "right"]
    assert result.has_verdict and result.score == 1.0 and result.passed, result
    assert result.details == "5/5 cases passed"
    assert result.reward_components == {"correctness": 1.0}


def test_a_hanging_answer_costs_one_case_timeout(judged):
    result = judged[True, "hangs"]
    assert result.has_verdict and result.score == 0.0, result
    errors = _errors(result)
    assert errors[0].startswith("timed out"), errors
    assert errors[1:] == [SKIPPED] * 4  # never called: no case waited for its own timeout


def test_without_stopping_later_cases_still_run(judged):
    result = judged[False, "hangs_on_zero"]
    assert result.has_verdict and result.score == 0.8, result
    assert _errors(result)[0].startswith("timed out") and _errors(result)[1:] == [""] * 4
    stopped = judged[True, "hangs_on_zero"]
    assert stopped.score == 0.0 and _errors(stopped)[1:] == [SKIPPED] * 4


@pytest.mark.parametrize("name, cause", [("raises_on_import", "RuntimeError: not today"),
                                         ("syntax_error", "SyntaxError")])
def test_an_answer_that_does_not_load_fails_every_case(judged, name, cause):
    result = judged[True, name]
    assert result.has_verdict and result.score == 0.0 and not result.passed, result
    assert len(result.cases) == 5
    for error in _errors(result):
        assert error.startswith("could not load the solution: ") and cause in error, error


def test_types_are_checked_through_the_judge(judged):
    result = judged[True, "bool_and_float"]  # True for 1 and 4.0 for 4: right values, wrong types
    assert result.has_verdict and result.score == 0.0, result
    assert "square(1): expected 1, got True" in _errors(result)[1]


def test_the_answers_own_timeout_error_fails_only_its_case(judged):
    result = judged[True, "own_timeout"]
    assert result.score == 0.8, result
    assert _errors(result)[0] == "TimeoutError: mine"
