"""A call that sleeps far past the case and run deadlines."""

from harness import Attack

ATTACK = Attack(
    name="sleep_past_deadline",
    tags=("time",),
    tries="to hold its run (and its slot) past every deadline by sleeping in the call",
    solution="import time\ndef answer():\n    time.sleep(3600)\n    return '@CLAIM@'\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
