"""The reward contract's verdict and score rules, table by table."""

from __future__ import annotations

import math

import pytest

from deepgym_ray import contract
from deepgym_ray.contract import MODEL_FAULT_ERRORS, check_components, check_score, is_verdict
from deepgym_ray.models import RunResult

EXPECTED_MODEL_FAULTS = {
    "invalid_patch",
    "patch_apply_failed",
    "test_infra_tampering",
    "policy_sandbox_failure",
    "solution_timeout",
    "solution_error",
}

NO_VERDICT_ERRORS = [
    "sandbox_error",
    "runtime_error",
    "verifier_error",
    "timeout",
    "invalid_score",
    "cancelled",
    "provider_error",
    "something_nobody_defined",
    "",
]


def test_model_fault_errors_are_exactly_the_contracts_list():
    assert set(MODEL_FAULT_ERRORS) == EXPECTED_MODEL_FAULTS
    assert isinstance(MODEL_FAULT_ERRORS, frozenset)


@pytest.mark.parametrize("error_type", sorted(EXPECTED_MODEL_FAULTS))
@pytest.mark.parametrize("exit_code", [None, 0, 1, 137])
def test_each_model_fault_is_a_verdict(error_type, exit_code):
    assert is_verdict(exit_code, error_type) is True
    assert RunResult(error_type=error_type, exit_code=exit_code).has_verdict is True


@pytest.mark.parametrize("error_type", NO_VERDICT_ERRORS)
@pytest.mark.parametrize("exit_code", [None, 0, 1])
def test_every_other_error_type_is_not_a_verdict(error_type, exit_code):
    assert is_verdict(exit_code, error_type) is False
    result = RunResult(error_type=error_type, exit_code=exit_code, score=1.0, passed=True)
    assert result.has_verdict is False
    assert result.reward is None


@pytest.mark.parametrize("error_type", [None, *sorted(EXPECTED_MODEL_FAULTS), "sandbox_error"])
def test_exit_code_2_is_never_a_verdict(error_type):
    assert is_verdict(2, error_type) is False
    assert RunResult(exit_code=2, error_type=error_type, score=1.0).reward is None


@pytest.mark.parametrize("exit_code", [None, 0, 1])
def test_no_error_type_is_a_verdict(exit_code):
    assert is_verdict(exit_code, None) is True


@pytest.mark.parametrize(
    ("score", "problem_fragment"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (1.5, "outside [0, 1]"),
        (-0.01, "outside [0, 1]"),
        (1.0001, "outside [0, 1]"),
        ("1.0", "must be a number"),
        (None, "must be a number"),
        (True, "must be a number"),
    ],
)
def test_invalid_scores_are_rejected(score, problem_fragment):
    problem = check_score(score)
    assert problem is not None and problem_fragment in problem
    result = RunResult(score=score, passed=True, exit_code=0)
    assert result.error_type == contract.INVALID_SCORE
    assert result.has_verdict is False
    assert result.reward is None
    assert result.score == 0.0 and result.passed is False
    assert problem_fragment in (result.details or "")


@pytest.mark.parametrize(
    ("score", "stored"),
    [(0, 0.0), (1, 1.0), (0.25, 0.25), (1 + 1e-9, 1.0), (-1e-9, 0.0), (0.999999, 0.999999)],
)
def test_valid_scores_are_kept_and_float_noise_is_clamped(score, stored):
    assert check_score(score) is None
    result = RunResult(score=score, exit_code=0)
    assert result.has_verdict is True
    assert result.score == stored


@pytest.mark.parametrize(
    "components",
    [
        {"correctness": float("nan")},
        {"correctness": 1.0, "style": float("inf")},
        {"speed": float("-inf")},
        {"x": "high"},
        {"": 1.0},
    ],
)
def test_non_finite_or_non_numeric_components_are_rejected(components):
    assert check_components(components) is not None
    result = RunResult(score=1.0, passed=True, exit_code=0, reward_components=components)
    assert result.error_type == contract.INVALID_SCORE
    assert result.reward is None
    assert result.reward_components is None


@pytest.mark.parametrize("components", [None, {}, {"correctness": 1.0, "speed": -3.5}])
def test_finite_components_are_kept(components):
    assert check_components(components) is None
    result = RunResult(score=0.5, exit_code=1, reward_components=components)
    assert result.has_verdict
    assert result.reward_components == components


def test_an_invalid_case_score_invalidates_the_run():
    result = RunResult(
        score=1.0,
        passed=True,
        cases=[{"id": "a", "passed": True, "score": 1.0}, {"id": "b", "score": math.nan}],
    )
    assert result.error_type == contract.INVALID_SCORE
    assert "case 'b'" in result.details
    assert result.reward is None
