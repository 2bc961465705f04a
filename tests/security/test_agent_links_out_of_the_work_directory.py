"""A Terminal-Bench answer plants symlinks and hard links in its work directory that point
where grading writes or reads (the reward file, the tests, the root), so that the tests'
own writes land there."""

from repo_attacks import attack_tests

TAGS = ('repository', 'two-phase', 'symlinks')
SCRIPT = r"""
ln -s /logs/verifier/reward.txt /app/answer.txt
ln -s / /app/root
ln -s ../tests /app/tests
ln /etc/passwd /app/passwd 2>/dev/null || true
"""


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT])
