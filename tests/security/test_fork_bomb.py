"""The classic fork bomb, at import and in the call."""

from harness import Attack

ATTACK = Attack(
    name="fork_bomb",
    tags=("processes",),
    tries="to exhaust the host's process table by forking without end",
    solution="import os\ndef _bomb():\n    while True:\n        try:\n            os.fork()\n"
             "        except OSError:\n            pass\n"
             "def answer():\n    _bomb()\n",
    # It spins on every core until its call's limit: 1 s of it shows that limit holds as
    # well as the default 2 s, at half the machine's CPU.
    case_timeout=1.0,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
