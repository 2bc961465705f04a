"""Huge output, huge details, huge cases: bounded, linear, and the verdict is kept.

A verifier's printed output is captured in memory, a bounded head and tail with the rest
counted. What travels back is bounded too: ``details`` keeps at most
``deepgym_result.DETAILS_LIMIT`` characters (its head and tail) and says it was truncated; each
case's extra text at most ``CASE_TEXT_LIMIT``. The score and ``passed`` never change.
"""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, SHAPES, env_for, expect, judged

from deepgym_ray.judge import deepgym_result

GOOD = "def f():\n    return 1\n"
WRONG = "def f():\n    return 2\n"


@pytest.mark.parametrize("shape", SHAPES)
def test_eighty_thousand_printed_lines(local_client, shape):
    body = (IN_PLAY + "for i in range(80000):\n    print('progress line', i, 'x' * 60)\n"
            "result = 1.0 if ok else 0.0\n")
    env = env_for(shape, body, timeout=20)
    expect(local_client.run(env, GOOD), score=1.0, passed=True, has_verdict=True,
           error_type=None)
    expect(local_client.run(env, WRONG), score=0.0, passed=False, has_verdict=True,
           error_type=None)


@pytest.mark.parametrize("shape", SHAPES)
def test_one_huge_write_of_many_lines(local_client, shape):
    body = (IN_PLAY + "import sys\nsys.stdout.write('line\\n' * 3_000_000)\n"
            "result = 1.0 if ok else 0.0\n")
    expect(local_client.run(env_for(shape, body), GOOD), score=1.0, passed=True,
           has_verdict=True, error_type=None)


def test_printed_output_without_a_result_says_how_much_was_printed(local_client):
    env = env_for("script", IN_PLAY + "for i in range(80000):\n    print('x' * 200)\n"
                  "result = 1.0\n").model_copy(update={"verifier_code": (
                      "import sys\nsolution_path = sys.argv[1]\n" + IN_PLAY
                      + "for i in range(80000):\n    print('x' * 200)\n")})
    result = judged(local_client, env)
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="verifier_error")
    assert "printed" in result.details and "characters" in result.details


@pytest.mark.parametrize("shape", SHAPES)
def test_forty_megabytes_of_details(local_client, shape):
    body = IN_PLAY + "result = {'score': 1.0 if ok else 0.0, 'details': 'd' * (40 << 20) + 'END'}\n"
    for code, score in ((GOOD, 1.0), (WRONG, 0.0)):
        result = local_client.run(env_for(shape, body, timeout=30), code)
        expect(result, score=score, passed=score == 1.0, has_verdict=True, error_type=None)
        assert len(result.details) <= deepgym_result.DETAILS_LIMIT + 200
        assert "truncated" in result.details and result.details.endswith("END")


@pytest.mark.parametrize("shape", ["module", "body"])
def test_huge_details_object_and_case_text(local_client, shape):
    body = (IN_PLAY + "big = ['x' * 1000] * 40000\n"
            "cases = [{'id': i, 'passed': True, 'output': 'o' * 100000} for i in range(300)]\n"
            "result = {'score': 1.0 if ok else 0.0, 'details': {'log': big}, 'cases': cases}\n")
    result = local_client.run(env_for(shape, body, timeout=30), GOOD)
    expect(result, score=1.0, passed=True, has_verdict=True, error_type=None)
    assert len(result.details) <= deepgym_result.DETAILS_LIMIT + 200
    assert len(result.cases) == 300 and all(c.passed for c in result.cases)
    for case in result.cases:
        assert len(str(case.model_extra["output"])) <= deepgym_result.CASE_TEXT_LIMIT + 200
    assert "truncated" in str(result.cases[0].model_extra["output"])


def test_too_many_cases_keeps_the_verdict(local_client):
    body = (IN_PLAY + "cases = [{'id': i, 'passed': ok} for i in range(300000)]\n"
            "result = {'score': 1.0 if ok else 0.0, 'cases': cases}\n")
    result = local_client.run(env_for("module", body, timeout=30), GOOD)
    expect(result, score=1.0, passed=True, has_verdict=True, error_type=None)
    assert len(result.cases) == deepgym_result.MAX_CASES
    assert "cases" in result.details and "left out" in result.details
