"""A Terminal-Bench answer whose program the tests run (as root, as Harbor runs them) spoils the
reward file instead of doing the task: writes a reward.json that is not JSON, or one whose
reward is out of range, or puts a directory where the tests write reward.txt, or a file or a
loop of links in place of /logs/verifier (the engine fails to read a path through them). The
tests have run on the answer's work: no usable reward is the answer's judged 0, never "no
verdict"."""

from repo_attacks import attack_tests

TAGS = ('repository', 'two-phase', 'forged-result')
TASK = "write-word-frequency"
_PROGRAM = "cat > /app/wordfreq.sh <<'EOF'\n#!/bin/sh\n{}\nEOF\nchmod 755 /app/wordfreq.sh\n"
SCRIPTS = [_PROGRAM.format(line) for line in (
    "echo 'not json' > /logs/verifier/reward.json",
    "echo '{\"reward\": 7}' > /logs/verifier/reward.json",
    "mkdir -p /logs/verifier/reward.txt",
    "rm -rf /logs/verifier; echo > /logs/verifier",
    "rm -rf /logs/verifier; ln -s /logs/verifier /logs/verifier",  # the engine: "too many links"
)]


test_alone, test_in_batch = attack_tests("terminal", SCRIPTS, "solution_error", task=TASK)
