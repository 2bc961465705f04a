"""Where a verifier's result comes from: bad JSON, no result, two results, the wrong channel.

A script's result is the last JSON line it printed on ``sys.stdout``; a module's or a bare
body's is what ``verify`` returned. No usable result is the verifier's failure (no verdict;
``run`` raises VerifierError), whenever it happened. Output written to stderr or straight to
file descriptor 1 is never read as the result.
"""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, SHAPES, env_for, expect, judged, raises

from deepgym_ray.exceptions import VerifierError


def assert_no_result(client, env):
    error = raises(client, env, VerifierError)
    assert "result" in str(error)
    expect(judged(client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


SCRIPT_WITHOUT_RESULT = {
    "bad_json": "print('{\"score\": 1')\n",
    "nothing": "pass\n",
    "plain_text": "print('all tests passed')\n",
    "json_on_stderr": "import json, sys\nprint(json.dumps({'score': 1.0}), file=sys.stderr)\n",
    "json_on_fd_1": "import json, os\nos.write(1, (json.dumps({'score': 1.0}) + '\\n').encode())\n",
    "json_list": "print('[1.0]')\n",
    "json_string": "print('\"1.0\"')\n",
}


@pytest.mark.parametrize("case", sorted(SCRIPT_WITHOUT_RESULT))
def test_script_without_a_json_result(local_client, case):
    code = "import sys\nsolution_path = sys.argv[1]\n" + IN_PLAY + SCRIPT_WITHOUT_RESULT[case]
    from deepgym_ray.models import Environment

    assert_no_result(local_client, Environment(name="vf-script", verifier_code=code,
                                               timeout=20, case_timeout=5))


@pytest.mark.parametrize("shape", ["module", "body"])
@pytest.mark.parametrize("returned", ["None", "'1.0'", "[1.0]", "object()"])
def test_module_returning_no_usable_result(local_client, shape, returned):
    assert_no_result(local_client, env_for(shape, IN_PLAY + f"result = {returned}\n"))


def test_two_printed_results_the_last_one_counts(local_client):
    first = env_for("script", IN_PLAY + "print('{\"score\": 1.0}')\nresult = 0.0\n")
    expect(local_client.run(first, "def f():\n    return 1\n"), score=0.0, passed=False,
           has_verdict=True, error_type=None)
    last = env_for("script", IN_PLAY + "print('{\"score\": 0.0}')\nresult = 1.0\n")
    expect(local_client.run(last, "def f():\n    return 1\n"), score=1.0, passed=True,
           has_verdict=True, error_type=None)
    trailing_log = env_for("script", IN_PLAY + "result = 0.25\n", result="result")
    trailing_log = trailing_log.model_copy(
        update={"verifier_code": trailing_log.verifier_code + "print('done')\n"})
    expect(local_client.run(trailing_log, "def f():\n    return 1\n"), score=0.25, passed=False,
           has_verdict=True, error_type=None)


@pytest.mark.parametrize("shape", ["module", "body"])
def test_a_module_returns_its_result_whatever_it_printed(local_client, shape):
    body = IN_PLAY + "print('{\"score\": 1.0, \"passed\": true}')\nresult = 0.25\n"
    expect(local_client.run(env_for(shape, body), "def f():\n    return 1\n"), score=0.25,
           passed=False, has_verdict=True, error_type=None)


@pytest.mark.parametrize("shape", SHAPES)
def test_writes_to_fd_1_and_stderr_do_not_disturb_the_result(local_client, shape):
    body = (IN_PLAY + "import os, sys\n"
            "os.write(1, b'{\"score\": 1.0, \"passed\": true}\\n' * 2000)\n"
            "print('{\"score\": 1.0}', file=sys.stderr)\n"
            "os.write(2, b'noise\\n' * 2000)\n"
            "result = 0.0 if ok else 0.5\n")
    expect(local_client.run(env_for(shape, body), "def f():\n    return 2\n"), score=0.5,
           passed=False, has_verdict=True, error_type=None)


@pytest.mark.parametrize("shape", SHAPES)
def test_stdout_buffer_writes_are_captured(local_client, shape):
    body = (IN_PLAY + "import sys\nsys.stdout.buffer.write(b'log line\\n')\n"
            "sys.stdout.flush()\nresult = 1.0 if ok else 0.0\n")
    expect(local_client.run(env_for(shape, body), "def f():\n    return 1\n"), score=1.0,
           passed=True, has_verdict=True, error_type=None)
