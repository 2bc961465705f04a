"""Return objects whose __eq__, __hash__ and __repr__ lie or raise."""

from harness import Attack

HOSTILE = r'''
class Liar(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        raise RuntimeError("no hash")
    def __repr__(self):
        raise RuntimeError("no repr")
    def __reduce__(self):
        return (str, ("@CLAIM@",))
    def __str__(self):
        return "@CLAIM@"
def answer():
    return Liar("x")
'''

ATTACK = Attack(
    name="hostile_eq_hash_repr",
    tags=("plain-data",),
    tries="to pass an equality check with a str subclass whose __eq__ is always True (and "
          "whose __hash__, __repr__, __reduce__ and __str__ lie or raise)",
    solution=HOSTILE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
