"""An agent looks for the verifier and its test cases (the secret is in both) wherever they
could be: beside its work directory, in the runner's directory, in other processes' views."""

from session_attacks import EVERYWHERE, PATTERN, bash, session_attack_tests

TAGS = ("sessions", "read-secrets")

test_alone, test_in_batch = session_attack_tests([
    [bash(f"grep -rhos '{PATTERN}' {EVERYWHERE} 2>/dev/null | head -n 1 > answer.txt; "
          "cat answer.txt")],
    [bash("for f in ../verifier.py ../../verifier.py ../test_cases.json /deepgym/run/work/* "
          "/proc/*/cwd/verifier.py /proc/*/cwd/test_cases.json /proc/*/environ; do "
          f"grep -hos '{PATTERN}' \"$f\" 2>/dev/null; done | head -n 1 > answer.txt")],
])
