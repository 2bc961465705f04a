"""Return containers and numbers that lie: dict/list/int subclasses, bool tricks."""

from harness import Attack

HOSTILE = r'''
class Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
    def __bool__(self):
        return True
class AllKeys(dict):
    def __eq__(self, other):
        return True
    def __getitem__(self, key):
        return "@CLAIM@"
class Same(list):
    def __eq__(self, other):
        return True
def answer():
    return Same([AllKeys(a=Yes(1))])
'''

ATTACK = Attack(
    name="hostile_containers",
    tags=("plain-data",),
    tries="to pass an equality check with list, dict and int subclasses that equal anything",
    solution=HOSTILE,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
