"""Hundreds of MB on stdout, at import and in the call."""

from harness import Attack

ATTACK = Attack(
    name="stdout_flood",
    tags=("output",),
    tries="to exhaust the judge's memory (or bury the verdict) with 300 MB on stdout",
    solution="import sys\nsys.stdout.write('x' * (100 << 20))\nsys.stdout.flush()\n"
             "def answer():\n    for _ in range(2):\n        print('z' * (100 << 20))\n"
             "    return None\n",
    timeout=10.0,
    case_timeout=8.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
