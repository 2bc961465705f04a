"""A patch adds a conftest.py whose hook reports every test as passed (a root one, and one
beside the tests): SWE-bench's harness graded it resolved."""

from repo_attacks import FORCE_PASSES, attack_tests, new_file

TAGS = ('repository', 'tests', 'forged-pass')
DIFFS = [new_file(where, FORCE_PASSES) for where in ("conftest.py", "minicalc/conftest.py")]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
