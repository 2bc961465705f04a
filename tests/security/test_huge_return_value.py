"""Return a value of hundreds of MB."""

from harness import Attack

ATTACK = Attack(
    name="huge_return_value",
    tags=("plain-data", "memory", "output"),
    tries="to exhaust the verifier's memory (or its wire) with a 300 MB return value",
    solution="def answer():\n    return ['x' * (1 << 20)] * 300\n",
    timeout=10.0,
    case_timeout=8.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
