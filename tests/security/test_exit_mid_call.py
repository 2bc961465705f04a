"""os._exit(0) in the middle of a call."""

from harness import Attack

ATTACK = Attack(
    name="exit_mid_call",
    tags=("runner", "control-flow"),
    tries="to have a clean exit (code 0) in the middle of a call taken as a pass",
    solution="import os, sys\ndef answer():\n    sys.stdout.flush()\n    os._exit(0)\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
