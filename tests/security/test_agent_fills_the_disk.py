"""A Terminal-Bench answer does the task, then writes without end outside its work directory
(its container's own layer, which the engine cannot cap): the container is killed past the
task's storage_mb, a judged 0, and the disk it wrote goes with the container."""

from repo_attacks import RIGHT_COUNT, attack_tests

TAGS = ('repository', 'disk')
SCRIPT = (RIGHT_COUNT.format(log="/app/server.log")
          + "\ncat /dev/zero > /root/fill\n")


test_alone, test_in_batch = attack_tests("terminal", [SCRIPT], 'policy_sandbox_failure')
