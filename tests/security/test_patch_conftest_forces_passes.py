"""A patch adds a conftest.py whose hook reports every test as passed (a root one, and one
beside the tests): SWE-bench's harness graded it resolved."""

import pytest
from repo_attacks import new_file, patch_attack, patch_batch

TAGS = ('repository', 'tests', 'forged-pass')
HOOK = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n")
DIFFS = [new_file(where, HOOK) for where in ("conftest.py", "minicalc/conftest.py")]


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    patch_attack(docker_client, DIFFS)


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    patch_batch(repo_pool, DIFFS)
