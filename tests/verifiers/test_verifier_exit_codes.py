"""Exit codes, SystemExit and os._exit in every verifier shape.

The contract's exit codes: 0 passed, 1 failed, 2 the verifier could not judge. Exit 2 (and any
code other than 0 or 1) is the verifier reporting its own failure: no verdict, before or after
the answer came into play, however the verifier exited (``sys.exit``, ``raise SystemExit``,
``os._exit``). An exit of 0 or 1 needs a printed result; the exit code then decides ``passed``
and a failed run never keeps full marks.
"""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, NOT_IN_PLAY, SHAPES, env_for, expect, judged, raises

from deepgym_ray.exceptions import VerifierError

OWN_ERROR_EXITS = {
    "sys.exit(2)": "import sys\nsys.exit(2)\n",
    "os._exit(2)": "import os\nos._exit(2)\n",
    "raise SystemExit(2)": "raise SystemExit(2)\n",
    "sys.exit(3)": "import sys\nsys.exit(3)\n",
    "sys.exit(-1)": "import sys\nsys.exit(-1)\n",
    "os._exit(7)": "import os\nos._exit(7)\n",
}
PLAY = {"in_play": IN_PLAY, "before_play": NOT_IN_PLAY}


@pytest.mark.parametrize("play", sorted(PLAY))
@pytest.mark.parametrize("exit_call", sorted(OWN_ERROR_EXITS))
@pytest.mark.parametrize("shape", SHAPES)
def test_exit_2_is_the_verifiers_own_error(local_client, shape, exit_call, play):
    body = PLAY[play] + OWN_ERROR_EXITS[exit_call] + "result = 1.0\n"
    result = local_client.run(env_for(shape, body), "def f():\n    return 1\n")
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="verifier_error")
    assert result.exit_code == 2 and "code" in (result.details or "")


@pytest.mark.parametrize("shape", SHAPES)
def test_exit_2_with_a_printed_result_keeps_no_score(local_client, shape):
    body = (IN_PLAY + "import json, sys\n"
            "print(json.dumps({'score': 1.0, 'passed': True, 'details': 'cannot judge'}))\n"
            "sys.exit(2)\nresult = 1.0\n")
    result = local_client.run(env_for(shape, body), "def f():\n    return 1\n")
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="verifier_error")
    assert result.details == "cannot judge"


NO_RESULT_EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "sys.exit()": "import sys\nsys.exit()\n",
    "sys.exit(1)": "import sys\nsys.exit(1)\n",
    "sys.exit('message')": "import sys\nsys.exit('the verifier gave up')\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "os._exit(1)": "import os\nos._exit(1)\n",
}


@pytest.mark.parametrize("play", sorted(PLAY))
@pytest.mark.parametrize("exit_call", sorted(NO_RESULT_EXITS))
@pytest.mark.parametrize("shape", SHAPES)
def test_exit_0_or_1_without_a_result_is_no_verdict(local_client, shape, exit_call, play):
    env = env_for(shape, PLAY[play] + NO_RESULT_EXITS[exit_call] + "result = 1.0\n")
    error = raises(local_client, env, VerifierError)
    assert "no" in str(error) and "result" in str(error)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


EXIT_VERSUS_RESULT = [
    # (printed result, exit call, expected score, expected passed, details must mention)
    ("{'score': 1}", "sys.exit(1)", 0.0, False, "exit code 1"),
    ("{'score': 1.0, 'passed': True}", "sys.exit(1)", 0.0, False, "exit code 1"),
    ("True", "sys.exit(1)", 0.0, False, "exit code 1"),
    ("{'score': 0.5}", "sys.exit(1)", 0.5, False, None),
    ("{'score': 0.5, 'passed': True}", "sys.exit(1)", 0.5, False, None),
    ("{'score': 1.0, 'passed': True}", "os._exit(1)", 0.0, False, "exit code 1"),
    ("{'score': 1.0, 'passed': True}", "sys.exit(0)", 1.0, True, None),
    # (full marks with "not passed" score 0: passed and score always agree)
    ("{'score': 1.0, 'passed': False}", "sys.exit(0)", 0.0, False, None),
    ("{'score': 0.0, 'passed': False}", "sys.exit(0)", 0.0, False, None),
]


@pytest.mark.parametrize(("printed", "exit_call", "score", "passed", "says"), EXIT_VERSUS_RESULT)
@pytest.mark.parametrize("shape", SHAPES)
def test_exit_code_decides_passed(local_client, shape, printed, exit_call, score, passed, says):
    body = (IN_PLAY + f"import json, os, sys\nprint(json.dumps({printed}))\nsys.stdout.flush()\n"
            f"{exit_call}\nresult = 1.0\n")
    result = local_client.run(env_for(shape, body), "def f():\n    return 1\n")
    expect(result, score=score, passed=passed, has_verdict=True, error_type=None)
    assert result.exit_code == (0 if passed else 1)
    if says:
        assert says in result.details and "contradict" in result.details


def test_script_exit_1_with_full_marks_from_the_reference_answer(local_client):
    """The reported case: a script printing {"score": 1} and exiting 1 did pass."""
    env = env_for("script", "import json, sys\nprint(json.dumps({'score': 1}))\nsys.exit(1)\n"
                  "result = 1.0\n")
    result = local_client.run(env, "def f():\n    return 1\n")
    assert (result.score, result.passed, result.has_verdict) == (0.0, False, True)
    assert not result.counts_as_passed


@pytest.mark.parametrize("shape", ["module", "body"])
def test_os_exit_in_a_thread_of_the_verifier_is_still_its_exit_2(local_client, shape):
    body = (IN_PLAY + "import os, threading, time\n"
            "threading.Thread(target=os._exit, args=(2,)).start()\ntime.sleep(30)\n"
            "result = 1.0\n")
    result = local_client.run(env_for(shape, body), "def f():\n    return 1\n")
    expect(result, score=0.0, passed=False, has_verdict=False, error_type="verifier_error")
    assert result.exit_code == 2


@pytest.mark.parametrize("shape", ["module", "body"])
def test_a_forked_child_of_the_verifier_exits_as_itself(local_client, shape):
    """os._exit in a child the verifier forked ends that child only (the verifier's exit
    handling must not run in it and report a second result)."""
    body = (IN_PLAY + "import os\npid = os.fork()\nif pid == 0:\n    os._exit(2)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "result = 1.0 if ok and os.waitstatus_to_exitcode(status) == 2 else 0.0\n")
    result = local_client.run(env_for(shape, body), "def f():\n    return 1\n")
    expect(result, score=1.0, passed=True, has_verdict=True, error_type=None)
