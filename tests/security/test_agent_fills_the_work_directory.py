"""A Terminal-Bench answer does the task, then fills its work directory (400 MB of files) for
grading to copy: more than the work directory may hold is the answer's 0."""

from repo_attacks import RIGHT_COUNT, attack_tests

TAGS = ('repository', 'disk')
SCRIPT = (RIGHT_COUNT.format(log="/app/server.log")
          + "\nfor i in 1 2 3 4; do head -c 100000000 /dev/zero > /app/fill$i; done\n")


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT], 'policy_sandbox_failure')
