"""A completion that is not valid text (a lone surrogate, possible in JSONL) is the model's
answer: it gets a verdict, never a raise. Written as the bytes it encodes to (not UTF-8),
it fails to load as Python, so the answer is judged 0."""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, SHAPES, env_for, expect

SURROGATE_ANSWERS = {
    "in_code": "def f():\n    return 1\ud800\n",
    "in_markdown": "Here it is:\n```python\ndef f():\n    return 1 \udfff\n```\n",
    "high_and_low_apart": "def f():\n    return \ud83d 1\n\ude00\n",
}


@pytest.mark.parametrize("answer", sorted(SURROGATE_ANSWERS))
@pytest.mark.parametrize("shape", SHAPES)
def test_lone_surrogate_answer_is_judged_zero(local_client, shape, answer):
    env = env_for(shape, IN_PLAY + "result = 1.0 if ok else 0.0\n")
    result = local_client.run(env, SURROGATE_ANSWERS[answer])
    expect(result, score=0.0, passed=False, has_verdict=True, error_type="solution_error")


@pytest.mark.parametrize("shape", SHAPES)
def test_lone_surrogate_run_as_a_script_is_judged_zero(local_client, shape):
    body = ("from deepgym_solution import run_solution\n"
            "run = run_solution(solution_path)\n"
            "result = 1.0 if run.exit_code == 0 and run.stdout.strip() == 'ok' else 0.0\n")
    result = local_client.run(env_for(shape, body), "print('ok')  # \ud800\n")
    expect(result, score=0.0, passed=False, has_verdict=True, error_type=None)


def test_lone_surrogate_in_a_batch(local_client):
    env = env_for("module", IN_PLAY + "result = 1.0 if ok else 0.0\n")
    batch = local_client.run_batch(env, ["def f():\n    return 1\n",
                                         SURROGATE_ANSWERS["in_code"]])
    assert [(r.score, r.has_verdict) for r in batch.results] == [(1.0, True), (0.0, True)]


@pytest.mark.parametrize("shape", SHAPES)
def test_lone_surrogate_inside_a_string_literal_is_judged_zero(local_client, shape):
    """Python refuses a source file that is not UTF-8 wherever the bad bytes sit."""
    env = env_for(shape, IN_PLAY + "result = 1.0 if ok else 0.0\n")
    result = local_client.run(env, "def f():\n    s = '\ud800'\n    return 1\n")
    expect(result, score=0.0, passed=False, has_verdict=True, error_type="solution_error")
    assert "utf-8" in result.details.lower() or "unicode" in result.details.lower()


@pytest.mark.parametrize("shape", SHAPES)
def test_bom_and_coding_cookie_in_an_answer_load_as_python_reads_them(local_client, shape):
    env = env_for(shape, IN_PLAY + "result = 1.0 if ok else 0.0\n")
    for code in ("\ufeffdef f():\n    return 1\n",
                 "# -*- coding: utf-8 -*-\ndef f():\n    return 1  # caf\u00e9\n"):
        expect(local_client.run(env, code), score=1.0, passed=True, has_verdict=True,
               error_type=None)


@pytest.mark.parametrize("shape", SHAPES)
def test_details_quoting_a_surrogate_from_the_solution_stay_printable(local_client, shape):
    body = ("from deepgym_solution import load_solution\n"
            "got = load_solution(solution_path).f()\n"
            "result = {'score': 0.0, 'details': 'got ' + got}\n")
    result = local_client.run(env_for(shape, body), "def f():\n    return 'x' + chr(0xD800)\n")
    expect(result, score=0.0, passed=False, has_verdict=True, error_type=None)
    assert result.details == "got x?"
    result.details.encode("utf-8")
