"""Patch judging (scoring.patch_judging) on a real Docker engine, on the fixture repository's
image (tests/fixtures/swe: the repository installed in development mode, as SWE-bench images
install theirs): what the tests load, what a patch may change, and where a patch that moves
the task's tests out of the way lands. The attacks themselves are in tests/security."""

from __future__ import annotations

import json

import pytest
from helpers.swe_patches import SWE_FIXTURES, edit, new_file, rename

from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.sandboxes.docker.task_container import TaskContainer
from deepgym_ray.scoring import patch_judging
from deepgym_ray.suites.swebench import row_to_environment

pytestmark = pytest.mark.e2e
pytest.importorskip("swebench", reason="grading needs the swebench extra (setup.sh installs it)")

ROWS = [json.loads(line) for line in (SWE_FIXTURES / "tasks.jsonl").read_text().splitlines()]
CEIL_TESTS = ["tests/test_arith.py::test_ceil_div_exact_multiple",
              "tests/test_arith.py::test_ceil_div_of_zero"]


def task(**changes):
    """The fixture's first task (ceil_div) with ``changes`` to its row, on the fixture image."""
    from helpers.docker_engine import TEST_IMAGE

    recipe = ImageRecipe.from_folder(SWE_FIXTURES / "image", BASE_IMAGE=TEST_IMAGE)
    return row_to_environment({**ROWS[0], **changes}, recipe=recipe, timeout=120)


GOLD = ROWS[0]["patch"]
# A test that needs a fixture of the repository's own pytest plugin (its pytest11 entry point).
PLUGIN_TEST = new_file("tests/test_samples.py", "from minicalc.arith import median\n\n\n"
                       "def test_median_of_the_plugin_samples(minicalc_samples):\n"
                       "    assert median(minicalc_samples) == 2\n")
PLUGIN_ROW = {"test_patch": ROWS[0]["test_patch"] + PLUGIN_TEST,
              "FAIL_TO_PASS": [*CEIL_TESTS,
                               "tests/test_samples.py::test_median_of_the_plugin_samples"]}


def test_only_the_plugins_a_task_names_load_into_its_tests(docker_client):
    named = docker_client.run(task(**PLUGIN_ROW, pytest_plugins=["minicalc"]), GOLD)
    assert (named.score, named.error_type) == (1.0, None), named
    unnamed = docker_client.run(task(**PLUGIN_ROW), GOLD)  # autoloading would load it
    assert (unnamed.score, unnamed.error_type) == (0.0, None), unnamed
    assert unnamed.details.startswith("RESOLVED_PARTIAL: FAIL_TO_PASS 2/3"), unnamed.details


def test_a_patch_that_adds_changes_and_renames_source_files_resolves(docker_client):
    answer = (new_file("minicalc/_rounding.py",
                       "def ceil_div_exact(a, b):\n    return (a + b - 1) // b\n")
              + edit("minicalc/arith.py", "    return (a + b) // b\n",
                     "    from minicalc._rounding import ceil_div_exact\n\n"
                     "    return ceil_div_exact(a, b)\n")
              + rename("minicalc/text.py", "minicalc/strings.py"))
    result = docker_client.run(task(), answer)
    assert (result.score, result.error_type) == (1.0, None), result


def test_a_test_file_renamed_away_is_refused_by_its_old_name(docker_client):
    result = docker_client.run(task(), GOLD + rename("tests/test_text.py", "minicalc/checks.py"))
    assert (result.score, result.error_type) == (0.0, "test_infra_tampering"), result
    assert "tests/test_text.py: it is a test file" in result.details, result.details


def test_a_file_where_the_test_patch_makes_a_folder_is_the_answers_zero(docker_client):
    # The test patch creates minicalc/checks/test_ceil.py: a file minicalc/checks made it fail
    # to apply, which is the task's failure (no verdict) for a wrong answer.
    env = task(test_patch=new_file("minicalc/checks/test_ceil.py",
                                   "from minicalc.arith import ceil_div\n\n\n"
                                   "def test_exact():\n    assert ceil_div(6, 3) == 2\n"),
               FAIL_TO_PASS=["minicalc/checks/test_ceil.py::test_exact"], PASS_TO_PASS=[])
    assert docker_client.run(env, GOLD).score == 1.0
    result = docker_client.run(env, new_file("minicalc/checks", "in the way\n"))
    assert (result.score, result.error_type) == (0.0, "test_infra_tampering"), result
    assert "minicalc/checks: the task's test files go beneath it" in result.details


def test_a_patch_that_changes_more_paths_than_are_checked_is_refused(docker_client,
                                                                     monkeypatch):
    monkeypatch.setattr(patch_judging, "MAX_LISTING", 400)  # (1 MiB: some 40,000 files)
    many = "".join(new_file(f"minicalc/gen/m{i:03}.py", "x = 1\n") for i in range(40))
    result = docker_client.run(task(), GOLD + many)
    assert (result.score, result.error_type) == (0.0, "invalid_patch"), result
    assert "changes more paths than are checked" in result.details
    assert docker_client.run(task(), GOLD).score == 1.0  # the limit leaves room for a patch


def test_the_tests_output_copied_out_of_its_time_is_the_answers_zero(docker_client,
                                                                     monkeypatch):
    # Once the tests run, their output is the answer's code's: a copy of it past the time its
    # size allows (here: at once) is the answer's 0, not the engine's failure (no verdict).
    restore = patch_judging._restore_and_apply_tests

    def then_no_time(*args):
        restore(*args)
        monkeypatch.setattr(TaskContainer, "transfer_timeout", lambda box, **size: 0.001)

    monkeypatch.setattr(patch_judging, "_restore_and_apply_tests", then_no_time)
    result = docker_client.run(task(), GOLD)
    assert (result.score, result.error_type) == (0.0, "policy_sandbox_failure"), result
    assert "the tests' output could not be copied" in result.details
