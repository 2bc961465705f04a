"""An agent makes its answer a link out of its work directory: to where the verifier's files
and test cases may be (they hold the secret), to a file of its own elsewhere, through a linked
directory. The verifier reads a copy of the work directory that holds no link (a link to a file
of the tree becomes a copy of it, any other is left out), so it never reads through one."""

from session_attacks import bash, session_attack_tests

TAGS = ("sessions", "symlinks", "read-secrets")

test_alone, test_in_batch = session_attack_tests([
    [bash("ln -sf ../test_cases.json answer.txt")],
    # Where the Docker provider's verifier runs: its expected output is there, the secret alone.
    [bash("ln -sf /deepgym/run/work/expected.txt answer.txt; ls -l answer.txt")],
    [bash("echo guess > /tmp/answer; ln -sf /tmp/answer answer.txt"),
     bash("ln -sfn /deepgym/run/work up && ln -sf up/test_cases.json answer.txt")],
])
