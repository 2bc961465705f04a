"""A Terminal-Bench answer does the task, then fills its work directory (400 MB of files) for
grading to copy: more than the work directory may hold is the answer's 0."""

import pytest
from repo_attacks import RIGHT_COUNT, terminal_attack, terminal_batch

TAGS = ('repository', 'disk')
SCRIPT = (RIGHT_COUNT.format(log="/app/server.log")
          + "\nfor i in 1 2 3 4; do head -c 100000000 /dev/zero > /app/fill$i; done\n")


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT], 'policy_sandbox_failure')


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT], 'policy_sandbox_failure')
