"""A completion holding a lone surrogate (possible in JSONL) (issue 10, hole 5)."""

from harness import Attack

ATTACK = Attack(
    name="lone_surrogate_completion",
    tags=("plain-data", "runner"),
    tries="to leave its run without a verdict (run raising UnicodeEncodeError) with a lone "
          "surrogate in the answer's source",
    solution="# \ud800\ndef answer():\n    return '\ud800'\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
