"""Allocate until something gives."""

from harness import Attack

ATTACK = Attack(
    name="memory_bomb",
    tags=("memory",),
    tries="to exhaust the host's memory by allocating and touching 64 MB chunks without end",
    solution="chunks = []\ndef answer():\n    while True:\n"
             "        chunks.append(bytearray(1 << 26))\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
