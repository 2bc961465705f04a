"""Repository task models: SWE-bench rows as PatchTasks, image recipes named by content, and
which paths a patch may not change."""

from __future__ import annotations

import json

import pytest

from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe, PatchTask, patched_paths
from deepgym_ray.scoring.judging import judge
from deepgym_ray.scoring.patch_judging import refused_path

ROW = {"instance_id": "demo-1", "repo": "o/r", "base_commit": "abc", "patch": "gold",
       "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n"
                     "+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n",
       "FAIL_TO_PASS": json.dumps(["tests/test_x.py::test_a"]), "PASS_TO_PASS": "[]",
       "created_at": "2026-01-01", "version": "1.0"}


def test_a_swe_bench_row_validates_as_it_is():
    task = PatchTask.model_validate(ROW)
    assert task.fail_to_pass == ["tests/test_x.py::test_a"] and task.pass_to_pass == []
    assert task.gold_patch == "gold" and task.test_files == ["tests/test_x.py"]
    assert PatchTask.model_validate({**ROW, "FAIL_TO_PASS": ["t::a"]}).fail_to_pass == ["t::a"]


@pytest.mark.parametrize(("change", "words"), [
    ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS must be a JSON list"),
    ({"FAIL_TO_PASS": "[]"}, "at least 1 item"),
    ({"PASS_TO_PASS": json.dumps([1])}, "PASS_TO_PASS must be a list of non-empty test ids"),
    ({"test_patch": ""}, "at least 1 character"),
    ({"workdir": "testbed"}, "must be an absolute path"),
])
def test_a_malformed_row_says_what_is_wrong(change, words):
    with pytest.raises(ValueError, match=words):
        PatchTask.model_validate({**ROW, **change})


def test_a_patch_environment_needs_an_image_and_no_verifier():
    task = PatchTask.model_validate(ROW)
    with pytest.raises(ValueError, match="needs `image`"):
        Environment(name="swebench/demo-1", patch_task=task)
    with pytest.raises(ValueError, match="give no verifier"):
        Environment(name="swebench/demo-1", patch_task=task, image="i", verifier_code="1")
    env = Environment(name="swebench/demo-1", patch_task=task, image="i")
    assert Environment.model_validate_json(env.model_dump_json()) == env


def test_an_image_recipe_is_named_by_its_content():
    a = ImageRecipe(dockerfile="FROM x\n", context={"f": b"\xff\x00"})
    assert a.tag == ImageRecipe(dockerfile="FROM x\n", context={"f": b"\xff\x00"}).tag
    assert a.tag != ImageRecipe(dockerfile="FROM x\n", context={"f": b"\xff\x01"}).tag
    assert a.tag != ImageRecipe(dockerfile="FROM x\n", context={"f": b"\xff\x00"},
                                build_args={"A": "1"}).tag
    assert ImageRecipe.model_validate_json(a.model_dump_json()) == a  # bytes travel as JSON
    with pytest.raises(ValueError, match="relative path"):
        ImageRecipe(dockerfile="FROM x\n", context={"../up": b""})


def test_patched_paths_reads_git_and_plain_headers():
    diff = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
            "--- /dev/null\n+++ b/new/file.py\n--- a/gone.py\n+++ /dev/null\n")
    assert patched_paths(diff) == ["m.py", "new/file.py", "gone.py"]


@pytest.mark.parametrize(("path", "refused"), [
    ("pkg/module.py", False), ("docs/index.rst", False), ("pkg/testing_utils.py", False),
    ("tests/test_x.py", True), ("pkg/tests/helpers.py", True), ("test_top.py", True),
    ("pkg/thing_test.py", True), ("conftest.py", True), ("pkg/conftest.py", True),
    ("sitecustomize.py", True), ("usercustomize.py", True), ("pkg/evil.pth", True),
    ("pytest.ini", True), ("tox.ini", True), ("setup.cfg", True), ("pyproject.toml", True),
    (".github/workflows/ci.yml", True), (".git/hooks/pre-commit", True),
    ("given/by/the/test_patch.txt", True),
])
def test_what_a_patch_may_not_change(path, refused):
    assert (refused_path(path, {"given/by/the/test_patch.txt"}) is not None) is refused


def test_a_patch_task_on_a_provider_without_task_containers_is_no_verdict():
    from deepgym_ray.exceptions import SandboxError
    from deepgym_ray.sandboxes import make_provider

    env = Environment(name="swebench/demo-1", patch_task=PatchTask.model_validate(ROW),
                      image="i")
    with pytest.raises(SandboxError, match="runs on the docker provider"):
        judge(make_provider("local"), env, ROW["test_patch"])


def test_a_log_is_graded_by_swe_bench_s_parser_and_rules():
    pytest.importorskip("swebench", reason="grading needs the swebench extra")
    from deepgym_ray.exceptions import VerifierError
    from deepgym_ray.scoring.patch_judging import _grader

    task = PatchTask.model_validate({**ROW, "PASS_TO_PASS": ["tests/test_x.py::test_b"]})
    grade = _grader(task)
    log = "PASSED tests/test_x.py::test_a\nPASSED tests/test_x.py::test_b\n"
    result = grade(log)
    assert (result.score, result.passed, result.details.split(":")[0]) == (
        1.0, True, "RESOLVED_FULL")
    result = grade("FAILED tests/test_x.py::test_a - assert 1 == 2\n"
                   "PASSED tests/test_x.py::test_b\n")
    assert (result.score, result.passed) == (0.0, False)
    assert [c.passed for c in result.cases] == [False, True]
    django = PatchTask.model_validate({**ROW, "FAIL_TO_PASS": ["test_a (app.tests.T)"],
                                       "log_parser": "parse_log_django"})
    assert _grader(django)("test_a (app.tests.T) ... ok\n").score == 1.0
    with pytest.raises(VerifierError, match="no log parser 'parse_log_nope'"):
        _grader(PatchTask.model_validate({**ROW, "log_parser": "parse_log_nope"}))
