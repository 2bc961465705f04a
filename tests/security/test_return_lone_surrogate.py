"""Return a string holding a lone surrogate."""

from harness import Attack

ATTACK = Attack(
    name="return_lone_surrogate",
    tags=("plain-data",),
    tries="to break the reply's encoding with a lone surrogate in the returned string",
    solution="def answer():\n    return '\\ud800' + '@CLAIM@'[:0]\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
