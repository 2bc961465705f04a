"""A Terminal-Bench answer computes its answer from the tests' own clean copy of the input
(/tests/server.log): it scores 1.0 if the tests are in its container."""

import pytest
from repo_attacks import RIGHT_COUNT, terminal_attack, terminal_batch

TAGS = ('repository', 'two-phase', 'read-secrets')
SCRIPT = "for f in /tests/server.log /logs/*/server.log; do [ -r $f ] && " + \
    RIGHT_COUNT.format(log="$f") + "; done; [ -s /app/answer.txt ] || echo 0 > /app/answer.txt\n"


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT])


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT])
