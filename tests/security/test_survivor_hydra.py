"""A hydra: every process of the run forks a replacement as fast as it can, in new sessions,
so a sweep that kills what it listed always finds new heads."""

from harness import Attack

HYDRA = r'''
import os, sys, time
HEAD = """
import os, time
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.001)
"""
def _plant():
    try:
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-S", "-c", HEAD, "@MARK@"])
    except OSError:
        pass
_plant()
def answer():
    time.sleep(0.3)  # let the heads grow to the run's process limit
    return None
'''

CHEAT_IF_SURVIVOR = r'''
import os
def answer():
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"@MARK@" in f.read():
                    return "@CLAIM@"
        except OSError:
            pass
    return None
'''

ATTACK = Attack(
    name="survivor_hydra",
    tags=("outliving", "processes"),
    tries="to outlive its run with processes that each keep forking new sessions up to the "
          "process limit, faster than a list-then-kill sweep removes them",
    solution=HYDRA,
    follow_up=CHEAT_IF_SURVIVOR,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
