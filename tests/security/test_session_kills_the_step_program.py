"""An agent tries to kill what runs its steps (every process it can signal, its parent, the
step program by name) and to stop it; the next step must still run, the episode end with a
verdict, and the host be clean."""

from session_attacks import bash, session_attack_tests

TAGS = ("sessions", "processes", "runner")

test_alone, test_in_batch = session_attack_tests([
    [bash("kill -9 -1; echo survived"), bash("echo 0 > answer.txt")],
    [bash("kill -9 $PPID; pkill -9 -f deepgym; kill -STOP -1; echo survived"),
     bash("echo 0 > answer.txt")],
])
