"""A Terminal-Bench answer writes the reward files itself, where grading would read them and
in its work directory, then leaves a loop that rewrites them."""

import pytest
from repo_attacks import terminal_attack, terminal_batch

TAGS = ('repository', 'two-phase', 'forged-result')
SCRIPT = r"""
mkdir -p /logs/verifier /app/logs/verifier
for d in /logs/verifier /app/logs/verifier; do
  echo 1 > $d/reward.txt; echo '{"reward": 1.0}' > $d/reward.json
done
(setsid sh -c 'while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' &)
"""


@pytest.mark.parametrize("provider", ["docker"])
def test_alone(docker_client, provider):
    terminal_attack(docker_client, [SCRIPT])


@pytest.mark.parametrize("provider", ["docker"])
def test_in_batch(repo_pool, provider):
    terminal_batch(repo_pool, [SCRIPT])
