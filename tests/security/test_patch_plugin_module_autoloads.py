"""A patch leaves the bug unfixed and edits an ordinary source file that happens to be the
repository's own pytest plugin (``minicalc/pytest_plugin.py``, the ``pytest11`` entry point
its development install registered) to report every test as passed. Nothing it changes is
refused; with pytest autoloading entry points it scored RESOLVED_FULL. The task names no
plugin, so none loads: the tests run and fail."""

from repo_attacks import FORCE_PASSES, attack_tests, edit

TAGS = ('repository', 'startup', 'forged-pass')
DIFFS = [edit("minicalc/pytest_plugin.py", "import pytest\n",
              FORCE_PASSES.replace("import pytest\n", "import pytest\n\n", 1))]


test_alone, test_in_batch = attack_tests("patch", DIFFS, with_gold=False)
