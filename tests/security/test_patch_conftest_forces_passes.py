"""A patch adds a conftest.py whose hook reports every test as passed (a root one, and one
beside the tests): SWE-bench's harness graded it resolved."""

import pytest
from repo_attacks import new_file, patch_attack

HOOK = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n")


@pytest.mark.parametrize("provider", ["docker"])
@pytest.mark.parametrize("where", ["conftest.py", "minicalc/conftest.py"])
def test_alone(docker_client, provider, where):
    patch_attack(docker_client, new_file(where, HOOK))
