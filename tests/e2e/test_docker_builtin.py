"""Every built-in environment in docker mode, through the Ray pool on a real engine: the
reference solution scores 1.0 and a subtly wrong answer is a judged 0 (below 1.0)."""

from __future__ import annotations

import pytest
from helpers.docker_engine import docker_skip_reason, make_docker_client, shutdown_pool
from helpers.wrong_solutions import SUBTLY_WRONG

from deepgym_ray.envs import builtin_names
from deepgym_ray.suites import load_environment

NAMES = builtin_names()


@pytest.fixture(scope="module")
def outcomes(ray_local):
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    client = make_docker_client(actors=2, concurrency=2)
    envs = [load_environment(name) for name in NAMES]
    try:
        answers = [env.reference_solution for env in envs] + [SUBTLY_WRONG[n] for n in NAMES]
        result = client.eval(envs + envs, answers)
    finally:
        shutdown_pool(client)
        client.close()
    half = len(NAMES)
    return dict(zip(NAMES, result.results[:half], strict=True)), \
        dict(zip(NAMES, result.results[half:], strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_reference_scores_one_in_a_container(outcomes, name):
    result = outcomes[0][name]
    assert result.has_verdict and result.score == 1.0, result
    assert result.sandbox_id and result.sandbox_id.startswith("deepgym-"), result.sandbox_id


@pytest.mark.parametrize("name", NAMES)
def test_wrong_answer_is_a_judged_failure(outcomes, name):
    result = outcomes[1][name]
    assert result.has_verdict, result
    assert result.score < 1.0 and not result.passed, result


def test_the_runs_shared_warm_containers(outcomes):
    """40 runs on 4 slots: containers are reused, not started per run."""
    containers = {r.sandbox_id.split("/")[0] for part in outcomes for r in part.values()}
    assert 1 <= len(containers) <= 8, containers


def test_cli_eval_in_docker_mode(tmp_path):
    """`deepgym-ray eval --mode docker` scores in containers (the image from the environment
    variable the provider reads, since the CLI has no image flag)."""
    import json
    import os
    import subprocess
    import sys

    from helpers.docker_engine import TEST_IMAGE

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "results.jsonl"
    env = dict(os.environ, DEEPGYM_DOCKER_IMAGE=TEST_IMAGE)
    done = subprocess.run([sys.executable, "-m", "deepgym_ray.cli", "eval", "builtin",
                           "--reference", "--mode", "docker", "--backend", "threads",
                           "--limit", "3", "--no-progress", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3, rows
    for row in rows:
        result = row.get("result", row)
        assert result["score"] == 1.0 and result["sandbox_id"].startswith("deepgym-"), row
