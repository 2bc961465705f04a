"""A Terminal-Bench answer does the task, then writes without end outside its work directory
(its container's own layer, which the engine cannot cap): the container is killed past the
task's storage_mb, a judged 0, and the disk it wrote goes with the container."""

import pytest
from repo_attacks import RIGHT_COUNT, terminal_attack, terminal_batch

TAGS = ('repository', 'disk')
SCRIPT = (RIGHT_COUNT.format(log="/app/server.log")
          + "\ncat /dev/zero > /root/fill\n")


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT], 'policy_sandbox_failure')


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT], 'policy_sandbox_failure')
