"""SWE-style patch tasks on a real Docker engine: the fixture repository's image built from its
Dockerfile, each answer applied in a fresh container, the hidden tests run and graded with
SWE-bench's own rules (tests/fixtures/swe). The patches that tamper with the tests or load
themselves into the test run are attacks of the security battery (tests/security/test_patch_*)."""

from __future__ import annotations

import pytest
from helpers.swe_patches import SWE_FIXTURES as FIXTURES
from helpers.swe_patches import edit

from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.suites.swebench import load_swebench

pytestmark = pytest.mark.e2e
pytest.importorskip("swebench", reason="grading needs the swebench extra (setup.sh installs it)")

@pytest.fixture(scope="module")
def swe(docker_client):
    from helpers.docker_engine import TEST_IMAGE

    recipe = ImageRecipe.from_folder(FIXTURES / "image", BASE_IMAGE=TEST_IMAGE)
    envs = load_swebench(FIXTURES / "tasks.jsonl", recipe=recipe, timeout=120)
    return docker_client, {env.patch_task.instance_id: env for env in envs}


def test_every_gold_patch_resolves_its_task(swe):
    client, envs = swe
    for env in envs.values():
        result = client.run(env, f"Here is the fix:\n```diff\n{env.patch_task.gold_patch}```\n")
        assert (result.score, result.passed, result.error_type) == (1.0, True, None), result
        assert result.details.startswith("RESOLVED_FULL"), result.details
        assert all(case.passed for case in result.cases)
        assert {case.id for case in result.cases} == set(
            env.patch_task.fail_to_pass + env.patch_task.pass_to_pass)


CEIL = "    return (a + b) // b\n"
ANSWERS = {
    "empty": ("", "invalid_patch"),
    "prose, no diff": ("I think the bug is in ceil_div.", "invalid_patch"),
    "does not apply": (edit("minicalc/arith.py", CEIL, "    return -1\n").replace(
        "(a + b) // b", "(a * b) // b"), "patch_apply_failed"),
    "edits the tests": (edit("tests/test_arith.py", "def test_mean", "def test_mean_x"),
                        "test_infra_tampering"),
}


@pytest.mark.parametrize("case", list(ANSWERS))
def test_answers_that_do_not_resolve_are_judged_zeros(swe, case):
    client, envs = swe
    answer, error_type = ANSWERS[case]
    result = client.run(envs["deepgym__minicalc-1"], answer)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == error_type, result


def test_a_wrong_patch_runs_the_tests_and_fails_them(swe):
    client, envs = swe
    wrong = edit("minicalc/arith.py", CEIL, "    return a // b + 1\n")  # wrong on 6/3 still
    result = client.run(envs["deepgym__minicalc-1"], wrong)
    assert (result.score, result.error_type) == (0.0, None), result
    assert result.has_verdict and result.details.startswith("RESOLVED_NO"), result.details
    failed = {case.id for case in result.cases if not case.passed}
    assert "tests/test_arith.py::test_ceil_div_exact_multiple" in failed


def test_partial_credit_gives_the_passing_share_of_fail_to_pass(swe):
    client, envs = swe
    env = envs["deepgym__minicalc-1"]
    task = env.patch_task.model_copy(update={"partial_credit": True})
    shaped = env.model_copy(update={"patch_task": task})
    # Right on 0 (test_ceil_div_of_zero), still wrong on an exact multiple of b > 1.
    half = edit("minicalc/arith.py", CEIL, "    return 0 if a == 0 else (a + b) // b\n")
    result = client.run(shaped, half)
    assert result.score == 0.5 and not result.passed, result


def test_an_answer_that_hangs_the_tests_is_its_timeout(swe):
    client, envs = swe
    env = envs["deepgym__minicalc-1"].model_copy(update={"timeout": 5.0})
    hang = edit("minicalc/arith.py", CEIL, "    while True:\n        pass\n")
    result = client.run(env, hang)
    assert (result.score, result.error_type) == (0.0, "solution_timeout"), result


def test_a_failed_image_build_is_no_verdict_with_the_builds_error(docker_client):
    from helpers.docker_engine import TEST_IMAGE

    task = load_swebench(FIXTURES / "tasks.jsonl", image_template="unused")[0].patch_task
    broken = ImageRecipe(dockerfile=f"FROM {TEST_IMAGE}\nRUN echo the-build-broke && exit 3\n")
    env = Environment(name="swebench/broken", patch_task=task, image_recipe=broken)
    result = docker_client.run_safe(env, task.gold_patch)
    assert not result.has_verdict and result.error_type == "image_build_error", result
    assert "the-build-broke" in result.details and broken.tag in result.details


def test_close_removes_every_task_container_and_the_spare(swe):
    from helpers.docker_engine import make_docker_client

    _, envs = swe
    client = make_docker_client(backend="threads")
    provider = client.provider
    env = envs["deepgym__minicalc-2"]
    assert client.run(env, env.patch_task.gold_patch).score == 1.0
    api = provider._client()
    mine = {"label": f"deepgym.instance={provider.instance}"}
    assert api.containers(all=True, filters=mine)  # the spare started behind the run
    client.close()
    assert api.containers(all=True, filters=mine) == []


def test_a_named_image_that_is_nowhere_is_no_verdict_naming_it(swe):
    client, envs = swe  # its registry: nothing listens on 127.0.0.1:9, the pull fails at once
    env = envs["deepgym__minicalc-1"].model_copy(
        update={"image": "127.0.0.1:9/deepgym-test/no-such-image:1", "image_recipe": None})
    result = client.run_safe(env, env.patch_task.gold_patch)
    assert not result.has_verdict and result.error_type == "sandbox_error", result
    assert "127.0.0.1:9/deepgym-test/no-such-image:1" in result.details
    assert "could not be pulled" in result.details
