"""A Terminal-Bench answer computes nothing and links its answer file to the tests' expected
output by a path that is inside its work directory by its text but not as the kernel resolves
it: through a link of its own to the directory itself or above (``d1 -> .``, then
``d1/../tests/expected.txt``), through chains of links, links to directories, and an
absolute name through the same link. On a task of the most common shape (the tests compare a
file in /app with an expected file in /tests), a kept link would score 1.0."""

from repo_attacks import attack_tests

TAGS = ('repository', 'two-phase', 'symlinks')
TASK = "other_shapes/sum-numbers"
SCRIPTS = [
    "cd /app && ln -s . d1 && ln -s d1/../tests/expected.txt answer.txt\n",
    # a link to the directory above from a subdirectory, reached through another link
    "cd /app && mkdir sub && ln -s .. sub/up && ln -s sub/up/../tests/expected.txt answer.txt\n",
    # a chain of links, then a link to the link
    "cd /app && ln -s . a && ln -s a/a/a b && ln -s b/../tests/expected.txt c && "
    "ln -s c answer.txt\n",
    # a link to a directory out of the tree, and a file through it
    "cd /app && ln -s . d1 && ln -s d1/../tests t && ln -s t/expected.txt answer.txt\n",
    # an absolute name inside the work directory by its text
    "cd /app && ln -s . d1 && ln -s /app/d1/../tests/expected.txt answer.txt\n",
]


test_alone, test_in_batch = attack_tests("terminal", SCRIPTS, task=TASK)
