"""Become root, or the sandbox's own user, through sudo (which a sandbox whose user is not
root has, passwordless, for that user: Daytona's default images)."""

from harness import Attack

SUDO = r'''
import subprocess

def _became(argv):
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=3)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip().isdigit()

def answer():
    for who in ([], ["-u", "daytona"], ["-u", "#0"], ["-g", "#0"]):
        for sudo in ("sudo", "/usr/bin/sudo", "/usr/local/bin/sudo"):
            if _became([sudo, "-n", *who, "id", "-u"]):
                return "@CLAIM@"
    return None
'''

ATTACK = Attack(
    name="sudo_escalation",
    tags=("runner", "secrets"),
    tries="to run a command through sudo without a password: as root, as the sandbox's own "
          "user (who may have passwordless sudo), or with root's group",
    solution=SUDO,
    timeout=20.0,
    case_timeout=15.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
