"""sys.exit(0) while the verifier loads it."""

from harness import Attack

ATTACK = Attack(
    name="sys_exit_at_import",
    tags=("control-flow", "runner"),
    tries="to have a clean exit at import time taken as success (or as no verdict)",
    solution="import sys\nsys.exit(0)\ndef answer():\n    return '@CLAIM@'\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
