"""A Terminal-Bench answer does the task only if its container has a network interface besides
loopback (it would then fetch its answer): it must have none."""

from repo_attacks import RIGHT_COUNT, attack_tests

TAGS = ('repository', 'network')
SCRIPT = ("if ls /sys/class/net | grep -qv '^lo$'; then "
          + RIGHT_COUNT.format(log="/app/server.log") + "; fi\n")


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT])
