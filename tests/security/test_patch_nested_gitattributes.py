"""A patch adds a ``.gitattributes`` below the top of the tree: its attributes (encoding,
line ends, a filter) apply to the files beneath it when the test files are restored and the
test patch is applied, so it could change the tests that run."""

from repo_attacks import attack_tests, new_file

TAGS = ('repository', 'tests', 'checkout')
DIFFS = [new_file(path, "*.py working-tree-encoding=UTF-16\n")
         for path in ("minicalc/.gitattributes", "docs/deep/.GITATTRIBUTES")]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
