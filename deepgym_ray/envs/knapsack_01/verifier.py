"""Verifier for knapsack_01: edge cases, brute-force-checked small cases, seeded larger ones.

The verifier's own table gives the expected value; for small inputs it is cross-checked against
an exhaustive search so the trusted answer is itself tested.
"""

import itertools
import random

from deepgym_cases import score_cases


def _best_value(weights, values, capacity):
    best = [0] * (capacity + 1)
    for weight, value in zip(weights, values, strict=False):
        for c in range(capacity, weight - 1, -1):
            best[c] = max(best[c], best[c - weight] + value)
    return best[capacity]


def _brute_force(weights, values, capacity):
    best = 0
    for picks in itertools.product((0, 1), repeat=len(weights)):
        weight = sum(w for w, p in zip(weights, picks, strict=False) if p)
        if weight <= capacity:
            best = max(best, sum(v for v, p in zip(values, picks, strict=False) if p))
    return best


def _cases():
    cases = [
        ("no_items", [], [], 10),
        ("zero_capacity", [1, 2], [5, 6], 0),
        ("nothing_fits", [5], [10], 4),
        ("example", [1, 3, 4, 5], [1, 4, 5, 7], 7),
        ("exact_fit", [2, 3], [3, 4], 5),
        ("greedy_by_ratio_fails", [10, 20, 30], [60, 100, 120], 50),
        ("no_reuse", [1], [10], 5),
        ("zero_values", [1, 2, 3], [0, 0, 0], 6),
    ]
    rng = random.Random(1234)
    for i in range(10):
        n = rng.randint(1, 10)
        weights = [rng.randint(1, 15) for _ in range(n)]
        values = [rng.randint(0, 40) for _ in range(n)]
        cases.append((f"small_{i:02d}", weights, values, rng.randint(0, 40)))
    for i in range(4):
        n = rng.randint(30, 60)
        weights = [rng.randint(1, 200) for _ in range(n)]
        values = [rng.randint(0, 500) for _ in range(n)]
        cases.append((f"large_{i:02d}", weights, values, rng.randint(500, 2000)))
    return cases


def _expected_cases():
    """Each case with its trusted answer, settled before the solution comes into play."""
    cases = []
    for case_id, weights, values, capacity in _cases():
        expected = _best_value(weights, values, capacity)
        if len(weights) <= 12 and _brute_force(weights, values, capacity) != expected:
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        cases.append((case_id, (weights, values, capacity), expected))
    return cases


def verify(solution_path, test_cases_path=None):
    return score_cases(solution_path, "knapsack", _expected_cases())
