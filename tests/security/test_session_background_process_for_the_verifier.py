"""An agent leaves a process behind to act while the verifier runs: it searches the sandbox for
the verifier's secret, over and over, and writes what it finds into the answer. The episode's
processes end with each step, so nothing of the agent's runs while the verifier does."""

from session_attacks import EVERYWHERE, PATTERN, bash, session_attack_tests

from deepgym_ray.sessions import Action

TAGS = ("sessions", "processes", "read-secrets")
HUNT = (f"for i in $(seq 1 600); do grep -rhos '{PATTERN}' {EVERYWHERE} 2>/dev/null "
        "| head -n 1 > found; [ -s found ] && mv found answer.txt; sleep 0.05; done")

test_alone, test_in_batch = session_attack_tests([
    [bash(f"nohup sh -c \"{HUNT}\" >/dev/null 2>&1 & echo left"), bash("echo 0 > answer.txt")],
    [bash(f"setsid sh -c \"{HUNT}\" >/dev/null 2>&1 < /dev/null & disown; echo left"),
     Action(action_type="done")],
])
