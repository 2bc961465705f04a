"""StopIteration crossing the solution proxy ends a verifier's zip/map early
(issue 10, hole 3)."""

from harness import Attack

VERIFIER = '''
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    inputs = [1, 2, 3, 4, 5]
    expected = [2, 4, 6, 8, 10]
    try:
        ok = all(a == b for a, b in zip(map(sol.double, inputs), expected))
    except Exception:
        ok = False
    return 1.0 if ok else 0.0
'''

ATTACK = Attack(
    name="stopiteration_through_proxy",
    tags=("control-flow", "plain-data"),
    tries="to pass all(a == b for a, b in zip(map(sol.f, inputs), expected)) by raising "
          "StopIteration, which stops the comparison before it compared anything",
    solution="def double(x):\n    raise StopIteration\n",
    verifier=VERIFIER,
    right="def double(x):\n    return 2 * x\n",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
