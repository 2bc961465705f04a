"""A Terminal-Bench answer computes its answer from the tests' own clean copy of the input
(/tests/server.log): it scores 1.0 if the tests are in its container."""

from repo_attacks import RIGHT_COUNT, attack_tests

TAGS = ('repository', 'two-phase', 'read-secrets')
SCRIPT = "for f in /tests/server.log /logs/*/server.log; do [ -r $f ] && " + \
    RIGHT_COUNT.format(log="$f") + "; done; [ -s /app/answer.txt ] || echo 0 > /app/answer.txt\n"


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT])
