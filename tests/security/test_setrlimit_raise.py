"""Raise the hard resource limits it was given."""

from harness import Attack

RAISE = r'''
import resource
def answer():
    raised = []
    for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_NOFILE"):
        which = getattr(resource, name)
        soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY:
            continue
        try:
            resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            raised.append(name)
        except (ValueError, OSError):
            pass
    return "@CLAIM@" if raised else None
'''

ATTACK = Attack(
    name="setrlimit_raise",
    tags=("memory", "processes", "time"),
    tries="to lift its own hard limits on memory, processes, file size, CPU and open files",
    solution=RAISE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
