"""A patch edits the task's hidden test file, adds a test, or plants a symlink: the tests
must be the task's own."""

from repo_attacks import attack_tests, new_file

TAGS = ('repository', 'tests', 'symlinks')
SYMLINK = ("diff --git a/minicalc/link.py b/minicalc/link.py\nnew file mode 120000\n"
           "--- /dev/null\n+++ b/minicalc/link.py\n@@ -0,0 +1 @@\n+../tests/__init__.py\n"
           "\\ No newline at end of file\n")
DIFFS = [new_file("tests/test_extra.py", "def test_x():\n    pass\n"),
         new_file("minicalc/test_helpers.py", "X = 1\n"), SYMLINK]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
