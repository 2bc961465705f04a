"""What a patch may not change (scoring.patch_judging.refused_path) and the pytest plugins a
patch task names (repo_tasks.PatchTask.pytest_plugins)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deepgym_ray.repo_tasks import PatchTask
from deepgym_ray.scoring.patch_judging import refused_path

TEST_FILES = {"tests/test_arith.py", "pkg/checks/test_new.py"}


@pytest.mark.parametrize(("path", "named"), [
    # Distribution metadata, at any depth and in any case (importlib.metadata lowers names).
    ("minicalc.egg-info/entry_points.txt", "minicalc.egg-info"),
    ("src/evil.egg-info/PKG-INFO", "evil.egg-info"),
    ("evil-1.0.dist-info/entry_points.txt", "evil-1.0.dist-info"),
    ("Evil.EGG-INFO/entry_points.txt", "Evil.EGG-INFO"),
    ("pkg/entry_points.txt", "entry_points.txt"),
    ("evil.egg/EGG-INFO/entry_points.txt", "evil.egg"),
    # What a development install leaves.
    ("minicalc.egg-link", "minicalc.egg-link"),
    ("lib/minicalc.egg-link", "minicalc.egg-link"),
    ("__editable___minicalc_1_0_finder.py", "__editable___minicalc_1_0_finder.py"),
    ("__editable__.minicalc-1.0.pth", "__editable__.minicalc-1.0.pth"),
    ("src/__editable__/x.py", "__editable__"),
    # Start-up modules in any form, byte code, pytest's newer configuration file.
    ("sitecustomize/__init__.py", "sitecustomize"),
    ("pkg/usercustomize.cpython-311-x86_64-linux-gnu.so",
     "usercustomize.cpython-311-x86_64-linux-gnu.so"),
    ("__pycache__/conftest.cpython-311-pytest-7.2.1.pyc", "__pycache__"),
    ("pkg/arith.pyc", "arith.pyc"),
    ("pytest.toml", "pytest.toml"),
    ("pkg/.pytest.toml", ".pytest.toml"),
])
def test_metadata_and_loaders_are_refused_naming_the_part(path, named):
    why = refused_path(path, TEST_FILES)
    assert why == f"{named} can load code into the test run or configure it", why


@pytest.mark.parametrize("path", [".gitattributes", "pkg/.gitattributes",
                                  "docs/deep/.GitAttributes", "sub/.git/config",
                                  "sub/.gitmodules"])
def test_git_files_are_refused_at_any_depth(path):
    assert refused_path(path, TEST_FILES) == "it is CI or repository configuration"


@pytest.mark.parametrize("path", ["pkg/checks", "pkg"])
def test_where_a_test_file_goes_is_refused(path):
    # A file there would make the test patch fail to apply: no verdict for a wrong answer.
    assert refused_path(path, TEST_FILES) == "the task's test files go beneath it"


@pytest.mark.parametrize("path", [
    "minicalc/arith.py", "minicalc/_rounding.py", "setup.py", "README.md",
    "pkg/site_customization.py", "pkg/egg_info_reader.py", "pkg/editable.py",
    "pkg/checks_extra.py", "docs/entry_points.rst", "pkg/distinfo.py",
])
def test_ordinary_source_files_are_allowed(path):
    assert refused_path(path, TEST_FILES) is None


ROW = {"instance_id": "demo-1", "test_patch": "diff --git a/t.py b/t.py\n",
       "FAIL_TO_PASS": '["t.py::test_new"]'}


@pytest.mark.parametrize(("given", "names"), [
    (None, []), ('["minicalc", "xdist.looponfail"]', ["minicalc", "xdist.looponfail"]),
    (["pytest_asyncio", "anyio"], ["pytest_asyncio", "anyio"]),
])
def test_a_task_names_its_pytest_plugins_as_a_list_or_json(given, names):
    row = ROW if given is None else {**ROW, "pytest_plugins": given}
    assert PatchTask.model_validate(row).pytest_plugins == names


@pytest.mark.parametrize("given", ['["x; rm -rf /"]', '["-p"]', "[1]", "not json", '[""]'])
def test_a_plugin_name_that_is_no_name_is_refused(given):
    with pytest.raises(ValidationError, match="pytest_plugins"):
        PatchTask.model_validate({**ROW, "pytest_plugins": given})
