"""SystemExit raised in a call must not reach the verifier as itself."""

from harness import Attack

# A sensor: 1.0 for the right answer, and 1.0 when a control-flow exception crossed the proxy
# as itself (what the attack tries); 0.0 for any other outcome.
VERIFIER = '''
from deepgym_solution import load_solution

CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit, KeyboardInterrupt, SystemExit)


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        ok = sol.double(21) == 42
    except CONTROL_FLOW as exc:
        return {"score": 1.0, "details": "crossed as itself: " + type(exc).__name__}
    except Exception as exc:
        return {"score": 0.0, "details": repr(exc)[:200]}
    return 1.0 if ok else 0.0
'''

ATTACK = Attack(
    name="system_exit_through_proxy",
    tags=("control-flow",),
    tries="to reach the verifier with SystemExit itself (which an ordinary except Exception "
          "does not catch) by raising it in the call",
    solution="def double(x):\n    raise SystemExit(0)\n",
    verifier=VERIFIER,
    right="def double(x):\n    return 2 * x\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
