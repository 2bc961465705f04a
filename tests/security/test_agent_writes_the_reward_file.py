"""A Terminal-Bench answer writes the reward files itself, where grading would read them and
in its work directory, then leaves a loop that rewrites them."""

from repo_attacks import attack_tests

TAGS = ('repository', 'two-phase', 'forged-result')
SCRIPT = r"""
mkdir -p /logs/verifier /app/logs/verifier
for d in /logs/verifier /app/logs/verifier; do
  echo 1 > $d/reward.txt; echo '{"reward": 1.0}' > $d/reward.json
done
(setsid sh -c 'while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' &)
"""


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT])
