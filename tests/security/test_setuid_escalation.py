"""Become root again, or any other uid: setuid, setresuid, capabilities."""

from harness import Attack

ESCALATE = r'''
import os
def answer():
    for attempt in (lambda: os.setuid(0), lambda: os.setresuid(0, 0, 0),
                    lambda: os.setgid(0), lambda: os.setgroups([0])):
        try:
            attempt()
        except (OSError, AttributeError):
            continue
        if os.geteuid() == 0 or os.getegid() == 0:
            return "@CLAIM@"
    try:
        with open("/proc/self/status") as f:
            caps = {l.split(":")[0]: int(l.split()[1], 16) for l in f if l.startswith("Cap")}
        if caps.get("CapEff") or caps.get("CapPrm"):
            return "@CLAIM@"
    except (OSError, ValueError):
        pass
    return None
'''

ATTACK = Attack(
    name="setuid_escalation",
    tags=("runner", "secrets"),
    tries="to get root (or any capability) back inside its sandbox with setuid, setresuid, "
          "setgid, setgroups",
    solution=ESCALATE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
