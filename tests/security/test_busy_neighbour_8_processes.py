"""A wrong answer running 8 busy processes next to a concurrent right answer
(issue 10, hole 4): a neighbour's load must not turn a right answer into a 0."""

from harness import Attack

# Six cases, each about 0.12 s of the solution's own CPU on an idle core (a quarter of the
# case timeout): scored by the fraction answered within the case timeout. Judged on wall-clock
# time, a neighbour's load turns the innocent's cases into timeouts.
VERIFIER = '''
from deepgym_solution import load_solution

# As many cases as keep the attack busy (each runs to the case timeout, 0.5 s of CPU of its 9
# processes together, then a restart) while the innocent answers all of its own (0.7 s of
# CPU): the attack's 8 processes live as long as its run, and more cases only lengthen the
# run, at both cores' cost, after the innocent is done (12 cases cost the suite 30 s of CPU
# more, across the providers, for the same finding).
CASES = 6


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    good, failed = 0, []
    for k in range(CASES):
        n = 1500000 + k
        try:
            good += sol.work(n) == (n - 1) * n * (2 * n - 1) // 6 % 1000003
        except Exception as exc:  # which limit a case met, should a right answer meet one
            failed.append(f"case {k}: {exc!r}"[:200])
    return {"score": good / CASES, "passed": good == CASES,
            "details": f"{good}/{CASES} {failed[:2]}"}
'''

RIGHT = "def work(n):\n    return sum(i * i for i in range(n)) % 1000003\n"

BUSY = r'''
import os
def _spin():
    while True:
        pass
for _ in range(8):
    try:
        if os.fork() == 0:
            _spin()
    except OSError:
        break
def work(n):
    _spin()
'''

ATTACK = Attack(
    name="busy_neighbour_8_processes",
    tags=("neighbours", "processes", "time", "concurrency"),
    tries="to make a concurrent right answer fail its per-case timeouts by keeping 8 processes "
          "busy (the innocent must still score 1.0)",
    solution=BUSY,
    verifier=VERIFIER,
    right=RIGHT,
    neighbour=True,
    # The busy answer spins through each of its cases to the case timeout (3 s of CPU in all,
    # and a restart of its process after each), and its run's bound is longer still: enough
    # to load the innocent's 6 cases (about 0.7 s of CPU) throughout on a quiet machine. The
    # innocent's own run time is far longer, so that on a machine whose cores another process
    # keeps busy too (scripts/stress_tests.sh) its run never ends before its cases do.
    timeout=12.0,
    right_timeout=60.0,
    case_timeout=0.5,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
