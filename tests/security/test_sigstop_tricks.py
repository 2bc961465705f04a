"""SIGSTOP itself, its process group and its parent, then resume later."""

from harness import Attack

STOP = r'''
import os, signal
def answer():
    for target in (os.getppid(), -os.getpgid(0)):
        try:
            os.kill(target, signal.SIGSTOP)
        except OSError:
            pass
    try:
        if os.fork() == 0:
            os.setsid()
            import time
            time.sleep(1)
            os.kill(os.getppid(), signal.SIGCONT)
            os._exit(0)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGSTOP)
    return None
'''

ATTACK = Attack(
    name="sigstop_tricks",
    tags=("time", "processes", "runner"),
    tries="to hang the judge (or escape its timeout) by stopping itself, its group and its "
          "parent with SIGSTOP",
    solution=STOP,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
