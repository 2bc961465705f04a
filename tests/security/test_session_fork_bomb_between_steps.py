"""An agent forks without end in the background and leaves it running between steps; its next
steps must still run (the bomb ends with its step, bounded by the sandbox's limits meanwhile),
and its neighbours in the batch still score."""

from session_attacks import bash, session_attack_tests

TAGS = ("sessions", "processes", "neighbours")

test_alone, test_in_batch = session_attack_tests([
    [bash("b() { b | b & }; b; sleep 1; echo bombed"),
     bash("echo still here; echo 0 > answer.txt")],
    [bash("nohup python3 -c 'import os\nwhile True:\n    os.fork()' >/dev/null 2>&1 & echo left"),
     bash("echo 0 > answer.txt")],
])
