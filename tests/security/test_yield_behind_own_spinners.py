"""A call that stays ready to run yet hardly runs: its own children take the CPU while it
yields, so its wait for a CPU grows and its CPU time does not. The time a solution waits for a
CPU is left out of its wall-clock bound (a neighbour's load must not time out a right answer);
this attack tries to use that to hold its call, and its slot, past every bound."""

from harness import Attack

YIELD = r'''
import os
def answer():
    for _ in range(4):
        try:
            if os.fork() == 0:
                while True:
                    pass
        except OSError:
            break
    while True:
        os.sched_yield()
'''

ATTACK = Attack(
    name="yield_behind_own_spinners",
    tags=("time", "processes"),
    tries="to escape the wall-clock bound by waiting for a CPU its own children keep busy "
          "(sched_yield in a loop)",
    solution=YIELD,
    # It spins on every core until its call's limit: 1 s of it shows that limit holds as
    # well as the default 2 s, at half the machine's CPU.
    case_timeout=1.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
