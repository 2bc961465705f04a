"""Return self-containing and absurdly deep values."""

from harness import Attack

ATTACK = Attack(
    name="recursive_return_value",
    tags=("plain-data",),
    tries="to crash the wire or the verifier with a list that contains itself, a dict that "
          "contains itself and a 200,000-level nested list",
    solution="def answer():\n    a = []\n    a.append(a)\n    d = {}\n    d['d'] = d\n"
             "    deep = []\n    for _ in range(200000):\n        deep = [deep]\n"
             "    return [a, d, deep]\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
