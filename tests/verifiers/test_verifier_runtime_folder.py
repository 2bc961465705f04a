"""An environment folder whose verifier uses every function of the verifier runtime
(tests/verifiers/runtime_env) judges its reference 1.0 and a wrong answer a judged 0 on every
provider: local, Docker and Daytona (its local test server), one batch each."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_ray.suites import load_environment

FOLDER = Path(__file__).parent / "runtime_env"
# Right as a script (answer.txt, stdout) and on most calls; wrong on a pair of two numbers.
WRONG = (FOLDER / "reference_solution.py").read_text(encoding="utf-8").replace(
    "    seen = {}\n", "    if len(nums) == 2:\n        return [1, 0]\n    seen = {}\n")


def _right_and_wrong(client):
    env = load_environment(FOLDER)
    assert WRONG != env.reference_solution
    right, wrong = client.run_batch(env, [env.reference_solution, WRONG]).results
    assert (right.score, right.passed, right.has_verdict, right.error_type) == (
        1.0, True, True, None), right.details
    assert (wrong.score, wrong.passed, wrong.has_verdict, wrong.error_type) == (
        0.0, False, True, None), wrong.details
    assert wrong.details == "failed: calls, several files"


def test_local(local_client):
    _right_and_wrong(local_client)


@pytest.mark.slow
def test_docker(docker_client):
    _right_and_wrong(docker_client)


@pytest.mark.slow
def test_daytona(daytona_server):
    from deepgym_ray.client import DeepGym

    client = DeepGym(mode="daytona", backend="threads", api_key=daytona_server.api_key,
                     api_url=daytona_server.url)
    try:
        _right_and_wrong(client)
    finally:
        client.close()
