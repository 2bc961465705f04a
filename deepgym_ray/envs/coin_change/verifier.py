"""Coin change: a module with verify(); compares against a breadth-first reference."""

import random

from deepgym_solution import load_solution

FIXED = [
    ([1, 2, 5], 11), ([2], 3), ([1], 0), ([1], 7), ([3, 7], 1), ([5, 10, 25], 30),
    ([2, 5, 10, 1], 27), ([186, 419, 83, 408], 6249), ([7], 14), ([4, 6], 7),
]


def _fewest(coins, amount):
    # Breadth-first over totals: the first level reaching `amount` is the fewest coins.
    seen, frontier, steps = {0}, [0], 0
    while frontier:
        if amount in seen:
            return steps
        nxt = []
        for total in frontier:
            for coin in coins:
                value = total + coin
                if value <= amount and value not in seen:
                    seen.add(value)
                    nxt.append(value)
        frontier, steps = nxt, steps + 1
    return steps if amount in seen else -1


def _cases():
    rng = random.Random(20240611)  # fixed: every completion of a GRPO group sees the same tests
    cases = list(FIXED)
    for _ in range(10):
        coins = sorted({rng.randint(1, 30) for _ in range(rng.randint(1, 4))})
        cases.append((coins, rng.randint(0, 300)))
    return cases


def verify(solution_path, test_cases_path=None):
    try:
        solution = load_solution(solution_path)
    except Exception as exc:
        return {"score": 0.0, "passed": False, "details": f"could not load: {exc!r}"}
    cases, passed = [], 0
    for i, (coins, amount) in enumerate(_cases()):
        expected = _fewest(coins, amount)
        try:
            got = solution.coin_change(list(coins), amount)
            ok = type(got) is int and got == expected
            note = f"expected {expected}, got {got!r}"
        except Exception as exc:  # the solution's exception or timeout: this case fails
            ok, note = False, f"{type(exc).__name__}: {exc}"
        passed += ok
        cases.append({"id": f"case_{i}", "passed": ok, "score": float(ok),
                      "input": f"coins={coins}, amount={amount}", "note": note[:300]})
    score = passed / len(cases)
    return {
        "score": score,
        "passed": passed == len(cases),
        "details": f"{passed}/{len(cases)} cases passed",
        "reward_components": {"correctness": score},
        "cases": cases,
    }
