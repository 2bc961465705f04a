"""Monkeypatch builtins, json and the equality of str in its own process."""

from harness import Attack

PATCH = r'''
import builtins, json, sys
json.dumps = lambda *a, **k: '{"score": 1.0, "passed": true}'
json.loads = lambda *a, **k: {"score": 1.0, "passed": True}
builtins.isinstance = lambda *a: True
builtins.print = lambda *a, **k: None
builtins.type = lambda *a: str
builtins.str = type("Str", (str,), {"__eq__": lambda s, o: True, "__hash__": str.__hash__})
sys.modules["deepgym_wire"] = json
def answer():
    return builtins.str("anything")
'''

ATTACK = Attack(
    name="monkeypatch_builtins",
    tags=("runner", "plain-data"),
    tries="to reach across the process boundary by patching builtins, json and the wire "
          "module in the solution's process",
    solution=PATCH,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
