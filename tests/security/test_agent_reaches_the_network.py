"""A Terminal-Bench answer does the task only if its container has a network interface besides
loopback (it would then fetch its answer): it must have none."""

import pytest
from repo_attacks import RIGHT_COUNT, terminal_attack, terminal_batch

TAGS = ('repository', 'network')
SCRIPT = ("if ls /sys/class/net | grep -qv '^lo$'; then "
          + RIGHT_COUNT.format(log="/app/server.log") + "; fi\n")


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT])


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT])
