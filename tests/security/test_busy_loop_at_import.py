"""An endless loop before the module even finishes importing."""

from harness import Attack

ATTACK = Attack(
    name="busy_loop_at_import",
    tags=("time",),
    tries="to hold the judge (and its slot) forever by never finishing its import",
    solution="while True:\n    pass\ndef answer():\n    return '@CLAIM@'\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
