"""A verifier raising or running out of time: before the answer is in play no verdict, after
it the model's 0 (solution_error / solution_timeout), in every shape."""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, NOT_IN_PLAY, SHAPES, env_for, expect, judged, raises

from deepgym_ray.exceptions import TimeoutError as DGTimeoutError
from deepgym_ray.exceptions import VerifierError

GOOD = "def f():\n    return 1\n"
SLOW_SOLUTION = "def f():\n    while True:\n        pass\n"


@pytest.mark.parametrize("shape", SHAPES)
def test_raising_before_play_is_no_verdict(local_client, shape):
    env = env_for(shape, NOT_IN_PLAY + "raise RuntimeError('verifier bug')\nresult = 1.0\n")
    assert "verifier bug" in str(raises(local_client, env, VerifierError))
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


@pytest.mark.parametrize("shape", SHAPES)
def test_raising_after_play_is_the_models_zero(local_client, shape):
    env = env_for(shape, IN_PLAY + "raise RuntimeError('after play')\nresult = 1.0\n")
    expect(local_client.run(env, GOOD), score=0.0, passed=False, has_verdict=True,
           error_type="solution_error")


@pytest.mark.parametrize("shape", SHAPES)
def test_printed_score_then_raise_after_play_is_not_kept(local_client, shape):
    body = (IN_PLAY + "import json\nprint(json.dumps({'score': 1.0, 'passed': True}))\n"
            "raise ValueError('late')\nresult = 1.0\n")
    expect(local_client.run(env_for(shape, body), GOOD), score=0.0, passed=False,
           has_verdict=True, error_type="solution_error")


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_timing_out_before_play_is_no_verdict(local_client, shape):
    env = env_for(shape, NOT_IN_PLAY + "while True:\n    pass\nresult = 1.0\n", timeout=2,
                  case_timeout=1)
    raises(local_client, env, DGTimeoutError)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="timeout")


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_timing_out_after_play_is_the_models_zero(local_client, shape):
    env = env_for(shape, IN_PLAY + "while True:\n    pass\nresult = 1.0\n", timeout=2,
                  case_timeout=1)
    expect(local_client.run(env, GOOD), score=0.0, passed=False, has_verdict=True,
           error_type="solution_timeout")


@pytest.mark.parametrize("shape", SHAPES)
def test_uncaught_case_timeout_is_the_models_zero(local_client, shape):
    env = env_for(shape, IN_PLAY.replace("== 1", "== 1 or True") + "result = 1.0\n", timeout=5,
                  case_timeout=1)
    expect(local_client.run(env, SLOW_SOLUTION), score=0.0, passed=False, has_verdict=True,
           error_type="solution_timeout")
