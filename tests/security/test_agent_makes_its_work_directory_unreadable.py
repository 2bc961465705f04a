"""A Terminal-Bench answer leaves its work directory as something the engine fails to copy: a
link to itself (the engine answers HTTP 500, "too many links"), a file. An engine error after
the answer ran was "no verdict"; what the engine cannot read because the answer's tree is in
the way is read as nothing there, and the tests judge that: a 0."""

from repo_attacks import attack_tests

TAGS = ('repository', 'two-phase', 'symlinks')
SCRIPTS = [
    "cd / && rm -rf /app && ln -s /app /app\n",
    "cd / && rm -rf /app && ln -s /loop /app && ln -s /app /loop\n",
    "cd / && rm -rf /app && echo 6 > /app\n",
]


test_alone, test_in_batch = attack_tests("terminal", SCRIPTS)
