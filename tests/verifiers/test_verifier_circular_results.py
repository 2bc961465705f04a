"""A result that cannot be encoded (a circular reference, a value whose repr fails) is the
verifier's failure: no verdict, before or after the answer came into play."""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, NOT_IN_PLAY, env_for, expect, judged, raises

from deepgym_ray.exceptions import VerifierError

CIRCULAR = {
    "details_contains_itself": ("d = {'k': 1}\nd['self'] = d\n"
                                "result = {'score': 1.0, 'details': d}\n"),
    "list_in_details": "l = [1]\nl.append(l)\nresult = {'score': 1.0, 'details': {'l': l}}\n",
    "case_contains_itself": ("c = {'id': 'a', 'passed': True}\nc['me'] = c\n"
                             "result = {'score': 1.0, 'cases': [c]}\n"),
    "result_contains_itself": "r = {'score': 1.0}\nr['again'] = r\nr['details'] = r\nresult = r\n",
    "returned_list_contains_itself": "l = []\nl.append(l)\nresult = l\n",
    "repr_raises": ("class Bad:\n    def __repr__(self):\n        raise RuntimeError('no repr')\n"
                    "result = {'score': 1.0, 'details': {'x': Bad()}}\n"),
}


@pytest.mark.parametrize("play", ["in_play", "before_play"])
@pytest.mark.parametrize("case", sorted(CIRCULAR))
@pytest.mark.parametrize("shape", ["module", "body"])
def test_unencodable_result_has_no_verdict(local_client, shape, case, play):
    opening = IN_PLAY if play == "in_play" else NOT_IN_PLAY
    env = env_for(shape, opening + CIRCULAR[case])
    error = raises(local_client, env, VerifierError)
    assert "result" in str(error)
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")


def test_script_that_cannot_print_its_circular_result(local_client):
    """A script fails inside its own json.dumps: a verifier crash, dated like any other."""
    env = env_for("script", NOT_IN_PLAY + CIRCULAR["details_contains_itself"])
    expect(judged(local_client, env), score=0.0, passed=False, has_verdict=False,
           error_type="verifier_error")
