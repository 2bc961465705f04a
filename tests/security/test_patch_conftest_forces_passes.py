"""A patch adds a conftest.py whose hook reports every test as passed (a root one, and one
beside the tests): SWE-bench's harness graded it resolved."""

from repo_attacks import attack_tests, new_file

TAGS = ('repository', 'tests', 'forged-pass')
HOOK = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n")
DIFFS = [new_file(where, HOOK) for where in ("conftest.py", "minicalc/conftest.py")]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
