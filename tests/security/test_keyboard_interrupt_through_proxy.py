"""KeyboardInterrupt raised in a call must not reach the verifier as itself."""

from harness import CONTROL_FLOW_RIGHT, CONTROL_FLOW_VERIFIER, Attack

ATTACK = Attack(
    name="keyboard_interrupt_through_proxy",
    tags=("control-flow",),
    tries="to reach the verifier with KeyboardInterrupt itself (which an ordinary except Exception "
          "does not catch) by raising it in the call",
    solution="def double(x):\n    raise KeyboardInterrupt(0)\n",
    verifier=CONTROL_FLOW_VERIFIER,
    right=CONTROL_FLOW_RIGHT,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
