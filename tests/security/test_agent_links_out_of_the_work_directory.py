"""A Terminal-Bench answer plants symlinks and hard links in its work directory that point
where grading writes or reads (the reward file, the tests, the root), so that the tests'
own writes land there."""

import pytest
from repo_attacks import terminal_attack, terminal_batch

TAGS = ('repository', 'two-phase', 'symlinks')
SCRIPT = r"""
ln -s /logs/verifier/reward.txt /app/answer.txt
ln -s / /app/root
ln -s ../tests /app/tests
ln /etc/passwd /app/passwd 2>/dev/null || true
"""


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT])


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT])
