"""Coin change: a module with verify(); compares against a breadth-first reference."""

import random

from deepgym_cases import score_cases

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
    cases = [(f"case_{i}", (list(coins), amount), _fewest(coins, amount),
              {"input": f"coins={coins}, amount={amount}"})
             for i, (coins, amount) in enumerate(_cases())]
    result = score_cases(solution_path, "coin_change", cases)
    result["reward_components"] = {"correctness": result["score"]}
    return result
