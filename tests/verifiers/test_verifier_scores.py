"""Scores, returned values, reward components and cases: each bad value gets the contract's result.

A NaN, infinite or out-of-range score (or reward component, or case score) is never reward:
``invalid_score``, no verdict, returned by ``run``. A result without a number for a score, or
with a malformed component table or case list, is the verifier's failure: ``verifier_error``,
no verdict (``run`` raises VerifierError). Floats, bools and dicts are normalised.
"""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, SHAPES, env_for, expect, judged, raises

from deepgym_ray.exceptions import VerifierError

GOOD = "def f():\n    return 1\n"

INVALID = ["float('nan')", "float('inf')", "float('-inf')", "1.5", "-0.5", "2",
           "{'score': float('nan')}", "{'score': 1.5, 'passed': True}", "{'score': -1}",
           "{'score': 0.5, 'reward_components': {'a': float('nan')}}",
           "{'score': 0.5, 'reward_components': {'a': float('inf')}}",
           "{'score': 0.5, 'reward_components': {'a': 'high'}}",
           "{'score': 0.5, 'reward_components': {'a': [1]}}",
           "{'score': 0.5, 'reward_components': {'': 1.0}}",
           "{'score': 1.0, 'cases': [{'id': 'a', 'passed': True, 'score': float('nan')}]}",
           "{'score': 1.0, 'cases': [{'id': 'a', 'passed': True, 'score': 3}]}"]


@pytest.mark.parametrize("value", INVALID)
@pytest.mark.parametrize("shape", SHAPES)
def test_never_reward(local_client, shape, value):
    result = local_client.run(env_for(shape, IN_PLAY + f"result = {value}\n"), GOOD)
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="invalid_score")
    assert result.reward is None and result.reward_components is None and result.cases is None


MALFORMED = ["{'details': 'no score'}", "{'score': '1.0'}", "{'score': None}",
             "{'score': True}", "{'score': [1.0]}", "{'score': 10 ** 400}",
             "{'score': 1.0, 'reward_components': [1.0]}",
             "{'score': 1.0, 'reward_components': 'a=1'}",
             "{'score': 1.0, 'cases': 'all passed'}", "{'score': 1.0, 'cases': [True, False]}",
             "{'score': 1.0, 'cases': {'a': True}}",
             "{'score': 1.0, 'cases': [{'id': 'a', 'passed': True, 'score': 'x'}]}",
             "{'score': 1.0, 'cases': [{'id': 'a', 'passed': 'yes'}]}",
             "{'score': 1.0, 'passed': 'yes'}", "{'score': 1.0, 'passed': 2}"]


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("shape", SHAPES)
def test_malformed_result_is_the_verifiers_failure(local_client, shape, value):
    env = env_for(shape, IN_PLAY + f"result = {value}\n")
    raises(local_client, env, VerifierError)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


NORMALISED = [
    ("True", 1.0, True), ("False", 0.0, False), ("1", 1.0, True), ("0", 0.0, False),
    ("0.25", 0.25, False), ("1.0 + 1e-9", 1.0, True), ("-1e-9", 0.0, False),
    ("{'score': 1}", 1.0, True), ("{'score': 0.5}", 0.5, False),
    ("{'passed': True}", 1.0, True), ("{'passed': False}", 0.0, False),
    ("{'score': 1.0, 'passed': 1}", 1.0, True), ("{'score': 0.0, 'passed': 0}", 0.0, False),
    # A contradictory result is made to agree: a pass needs full marks, and full marks with
    # "not passed" score 0 (the totals count ``passed``, trainers the score).
    ("{'score': 0.5, 'passed': True}", 0.5, False), ("{'score': 1.0, 'passed': False}", 0.0, False),
    ("{'score': 1.0, 'passed': 0}", 0.0, False),
]


@pytest.mark.parametrize(("value", "note"), [
    ("{'score': 0.5, 'passed': True}", "the verifier said passed with a score of 0.5"),
    ("{'score': 1.0, 'passed': False}", "the verifier gave full marks but said not passed")])
def test_a_contradictory_result_says_what_was_changed(local_client, value, note):
    result = local_client.run(env_for("module", IN_PLAY + f"result = {value}\n"), GOOD)
    assert result.has_verdict and not result.passed, result
    assert note in (result.details or ""), result.details


@pytest.mark.parametrize(("value", "score", "passed"), NORMALISED)
@pytest.mark.parametrize("shape", SHAPES)
def test_returns_are_normalised(local_client, shape, value, score, passed):
    result = local_client.run(env_for(shape, IN_PLAY + f"result = {value}\n"), GOOD)
    expect(result, score=score, passed=passed, has_verdict=True, error_type=None)
    assert result.exit_code == (0 if passed else 1)


@pytest.mark.parametrize("shape", SHAPES)
def test_components_and_cases_come_through(local_client, shape):
    value = ("{'score': 0.5, 'details': {'k': [1, 2]}, "
             "'reward_components': {'correct': 0.5, 'style': 1, 'len': -3.5}, "
             "'cases': [{'passed': True}, {'id': 7, 'passed': False, 'output': [1, 2]}, "
             "{'id': 'c', 'passed': True, 'score': 0.75}]}")
    result = local_client.run(env_for(shape, IN_PLAY + f"result = {value}\n"), GOOD)
    expect(result, score=0.5, passed=False, has_verdict=True, error_type=None)
    assert result.reward_components == {"correct": 0.5, "style": 1.0, "len": -3.5}
    assert [(c.id, c.passed, c.score) for c in result.cases] == [
        ("test_0", True, 1.0), ("7", False, 0.0), ("c", True, 0.75)]
    assert result.cases[1].model_extra == {"output": [1, 2]}
    assert result.details == '{"k": [1, 2]}'
