"""A double-fork + setsid survivor that keeps re-forking, and a later answer that cheats only
when it sees it (issue 10, hole 1)."""

from harness import Attack

SURVIVOR = r'''
import os, sys
# The survivor never keeps a pid for long: it forks, the parent exits, the child starts a new
# session, and so on, so a cleanup that lists processes and then kills them finds each pid
# already gone (and may count that as clean).
LOOP = """
import os, time
while True:
    try:
        if os.fork() != 0:
            os._exit(0)
        os.setsid()
    except OSError:
        time.sleep(0.01)
"""
def _plant():
    try:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-S", "-c", LOOP, "@MARK@"])
            os._exit(0)
    except OSError:
        pass
_plant()
def answer():
    _plant()
    return None
'''

CHEAT_IF_SURVIVOR = r'''
import os
def _survivor():
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"@MARK@" in f.read():
                    return True
        except OSError:
            pass
    return False
def answer():
    return "@CLAIM@" if _survivor() else None
'''

ATTACK = Attack(
    name="survivor_double_fork",
    tags=("outliving", "processes", "concurrency"),
    tries="to outlive its run with a double-forked, setsid, ever re-forking process that a "
          "later run can see (that run cheats only when it does)",
    solution=SURVIVOR,
    follow_up=CHEAT_IF_SURVIVOR,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
