"""Hundreds of MB on stderr, at import and in the call."""

from harness import Attack

ATTACK = Attack(
    name="stderr_flood",
    tags=("output",),
    tries="to exhaust the judge's memory (or block its pipes) with 300 MB on stderr",
    solution="import sys\nsys.stderr.write('y' * (100 << 20))\nsys.stderr.flush()\n"
             "def answer():\n    for _ in range(2):\n        sys.stderr.write('w' * (100 << 20))\n"
             "    return None\n",
    timeout=10.0,
    case_timeout=8.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
