"""Kill every process it can see, again and again, while other runs are going on."""

from harness import Attack

KILLER = r'''
import os, signal, time
def answer():
    me = os.getpid()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != me:
                for sig in (signal.SIGKILL, signal.SIGSTOP):
                    try:
                        os.kill(int(p), sig)
                    except OSError:
                        pass
    return None
'''

ATTACK = Attack(
    name="signal_other_runs",
    tags=("neighbours", "concurrency", "processes"),
    tries="to turn concurrent right answers into failures by killing or stopping every "
          "process it can see while they run (the innocent must still score 1.0)",
    solution=KILLER,
    right="import time\ndef answer():\n    time.sleep(0.5)\n    return '@SECRET@'\n",
    neighbour=True,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
