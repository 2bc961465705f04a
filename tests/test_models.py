"""Environment validation and the conservative totals of BatchResult / EvalResult."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deepgym_ray.models import BatchResult, Environment, EvalResult, RunResult

VERIFIER = "return 1.0"


def test_minimal_environment():
    env = Environment(name="echo", verifier_code=VERIFIER)
    assert env.verifier_source() == VERIFIER
    assert env.timeout > env.case_timeout > 0


def test_verifier_path_is_read(tmp_path):
    path = tmp_path / "verifier.py"
    path.write_text("print('{}')\n")
    env = Environment(name="from-file", verifier_path=path)
    assert env.verifier_source() == "print('{}')\n"


def test_unreadable_verifier_path_names_the_environment(tmp_path):
    env = Environment(name="gone", verifier_path=tmp_path / "missing.py")
    with pytest.raises(ValueError, match="'gone'.*missing.py"):
        env.verifier_source()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs verifier_code or verifier_path"),
        ({"verifier_code": "x", "verifier_path": "v.py"}, "not both"),
        ({"verifier_code": "   "}, "verifier_code is empty"),
        ({"verifier_code": VERIFIER, "name": ""}, "environment name"),
        ({"verifier_code": VERIFIER, "name": "../etc"}, "environment name"),
        ({"verifier_code": VERIFIER, "name": "has space"}, "environment name"),
        ({"verifier_code": VERIFIER, "support_files": {"/etc/passwd": ""}}, "relative path"),
        ({"verifier_code": VERIFIER, "support_files": {"a/../../x": ""}}, "'..'"),
        ({"verifier_code": VERIFIER, "support_files": {"..": ""}}, "'..'"),
        ({"verifier_code": VERIFIER, "support_files": {"C:/x": ""}}, "relative path"),
        ({"verifier_code": VERIFIER, "support_files": {"a\\b": ""}}, "backslash"),
        ({"verifier_code": VERIFIER, "support_files": {"verifier.py": ""}}, "judge's own file"),
        ({"verifier_code": VERIFIER, "support_files": {"solution.py": ""}}, "judge's own file"),
        ({"verifier_code": VERIFIER, "support_files": {"test_cases.json": ""}}, "judge's own"),
        ({"verifier_code": VERIFIER, "support_files": {"deepgym_runner.py": ""}}, "judge's own"),
        ({"verifier_code": VERIFIER, "support_files": {"deepgym_solution/x.py": ""}}, "judge's"),
        ({"verifier_code": VERIFIER, "timeout": 0}, "greater than 0"),
        ({"verifier_code": VERIFIER, "timeout": -5}, "greater than 0"),
        ({"verifier_code": VERIFIER, "case_timeout": 0}, "greater than 0"),
        ({"verifier_code": VERIFIER, "timeout": 5, "case_timeout": 10}, "case_timeout"),
        ({"verifier_code": VERIFIER, "env_vars": {"1BAD": "x"}}, "not a valid variable name"),
        ({"verifier_code": VERIFIER, "test_cases": [{"x": float("nan")}]}, "plain JSON"),
        ({"verifier_code": VERIFIER, "test_cases": [object()]}, "plain JSON"),
        ({"verifier_code": VERIFIER, "colour": "blue"}, "Extra inputs"),
    ],
)
def test_invalid_environments_say_what_is_wrong(kwargs, message):
    kwargs = {"name": "env", **kwargs}
    with pytest.raises(ValidationError, match=message):
        Environment(**kwargs)


def test_nested_support_files_are_allowed():
    env = Environment(
        name="with-data",
        verifier_code=VERIFIER,
        support_files={"data/cases.txt": "1 2\n", "helpers.py": "X = 1\n"},
    )
    assert set(env.support_files) == {"data/cases.txt", "helpers.py"}


def test_environment_round_trips_through_json():
    env = Environment(name="rt", verifier_code=VERIFIER, tags=["dp"], test_cases=[{"n": 1}])
    assert Environment.model_validate_json(env.model_dump_json()) == env


def test_run_result_details_accept_structured_values():
    assert RunResult(details={"failed": [1, 2]}).details == '{"failed": [1, 2]}'
    assert RunResult(details=None).details is None


def test_run_result_cases_keep_extra_fields():
    result = RunResult(score=0.5, cases=[{"id": 0, "passed": True, "score": 1.0, "input": [1]}])
    assert result.cases[0].id == "0"
    assert result.cases[0].model_dump()["input"] == [1]


# (score, passed, error_type, exit_code) for each kind of run.
PASSED = (1.0, True, None, 0)
FAILED = (0.25, False, None, 1)
MODEL_ZERO = (0.0, False, "solution_timeout", 1)
NO_VERDICT = (0.0, False, "sandbox_error", None)
NO_VERDICT_BUT_PASSED = (1.0, True, "timeout", 0)
VERIFIER_EXIT_2 = (1.0, True, None, 2)


def _results(*kinds):
    return [
        RunResult(score=s, passed=p, error_type=e, exit_code=c, env_name=f"env{i % 2}")
        for i, (s, p, e, c) in enumerate(kinds)
    ]


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (
            [PASSED, PASSED, FAILED, MODEL_ZERO, NO_VERDICT, NO_VERDICT_BUT_PASSED,
             VERIFIER_EXIT_2, PASSED, FAILED, NO_VERDICT],
            # 10 runs, 6 judged (3 passed), 4 without a verdict (2 of which "reported" a pass).
            dict(total=10, passed=3, failed=7, avg_score=(3 + 0.5) / 10, pass_rate=0.3,
                 judged=6, judged_pass_rate=0.5, judged_avg_score=3.5 / 6,
                 no_verdict=4, no_verdict_rate=0.4),
        ),
        (
            [NO_VERDICT_BUT_PASSED, NO_VERDICT_BUT_PASSED],
            dict(total=2, passed=0, failed=2, avg_score=0.0, pass_rate=0.0, judged=0,
                 judged_pass_rate=0.0, judged_avg_score=0.0, no_verdict=2, no_verdict_rate=1.0),
        ),
        (
            [PASSED, FAILED],
            dict(total=2, passed=1, failed=1, avg_score=0.625, pass_rate=0.5, judged=2,
                 judged_pass_rate=0.5, judged_avg_score=0.625, no_verdict=0, no_verdict_rate=0.0),
        ),
        (
            [],
            dict(total=0, passed=0, failed=0, avg_score=0.0, pass_rate=0.0, judged=0,
                 judged_pass_rate=0.0, judged_avg_score=0.0, no_verdict=0, no_verdict_rate=0.0),
        ),
    ],
    ids=["mixed", "only-no-verdict-passes", "all-judged", "empty"],
)
def test_totals_are_conservative(kinds, expected):
    batch = BatchResult(results=_results(*kinds))
    for name, value in expected.items():
        assert getattr(batch, name) == pytest.approx(value), name
    dumped = batch.model_dump()
    for name, value in expected.items():
        assert dumped[name] == pytest.approx(value), name


def test_rewards_are_none_without_a_verdict():
    batch = BatchResult(results=_results(PASSED, NO_VERDICT, MODEL_ZERO, VERIFIER_EXIT_2))
    assert batch.rewards == [1.0, None, 0.0, None]


def test_eval_result_names_each_environment_in_order():
    results = _results(PASSED, NO_VERDICT, FAILED)
    result = EvalResult(results=results, env_names=["a", "b", "a"])
    assert result.env_names == ["a", "b", "a"]
    assert result.passed == 1 and result.no_verdict == 1
    with pytest.raises(ValidationError, match="2 names for 3 results"):
        EvalResult(results=results, env_names=["a", "b"])
