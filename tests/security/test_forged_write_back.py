"""A solution that forges the proxy's write-back to empty the verifier's own arguments."""

from harness import Attack
from helpers.judge_probe import write_back_forger

# Like ``score_cases``: the call is a copied one (``function_caller``), and the check then reads
# the very list it sent. Only an emptied ``xs`` lets ``[]`` pass.
VERIFIER = '''
from deepgym_proxy import function_caller
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    xs = [3, 1, 2, 7, 5]
    try:
        got = function_caller(load_solution(solution_path), "sorted_copy")(xs)
    except Exception as exc:
        return {"score": 0.0, "passed": False, "details": repr(exc)[:300]}
    ok = got == sorted(xs)
    return {"score": float(ok), "passed": ok, "details": repr((got, xs))[:300]}
'''

RIGHT = "def sorted_copy(xs):\n    return sorted(xs)\n"

# The solution's every reply carries a write-back emptying the first argument, whether or
# not the request asked for one.
FORGER = write_back_forger([[0, ["l", []]]]) + "def sorted_copy(xs):\n    return []\n"

ATTACK = Attack(
    name="forged_write_back",
    tags=("plain-data", "fake-result"),
    tries="to empty the verifier's own argument list by attaching a forged write-back to a "
          "reply for a call that never asked for one, so that [] passes got == sorted(xs)",
    solution=FORGER,
    verifier=VERIFIER,
    right=RIGHT,
    test_cases=None,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
