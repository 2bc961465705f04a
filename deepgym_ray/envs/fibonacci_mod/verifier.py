"""Verifier for fibonacci_mod. Every case carries its own time limit.

Small cases get a generous limit; huge ``n`` gets about a second, which only an O(log n)
method meets. Cases are run grouped by limit, each group through a solution proxy whose
per-call timeout is that limit (``score_cases(..., timeout=...)``); a call that runs past it
fails that case only. Expected values come from 2x2 matrix powers, cross-checked with a
plain loop for small ``n``.
"""

import random

from deepgym_cases import score_cases, summarize

SMALL_LIMIT = 2.0  # seconds per call
HUGE_LIMIT = 1.0


def _matrix_fib(n, m):
    def multiply(x, y):
        return [[sum(x[i][k] * y[k][j] for k in range(2)) % m for j in range(2)] for i in range(2)]

    result, base = [[1 % m, 0], [0, 1 % m]], [[1, 1], [1, 0]]
    while n:
        if n & 1:
            result = multiply(result, base)
        base = multiply(base, base)
        n >>= 1
    return result[0][1]


def _loop_fib(n, m):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a % m


def _cases():
    """(id, n, m, per-case limit in seconds)."""
    cases = [
        ("n_zero", 0, 7, SMALL_LIMIT),
        ("n_one", 1, 7, SMALL_LIMIT),
        ("m_one", 50, 1, SMALL_LIMIT),
        ("example_10", 10, 1000, SMALL_LIMIT),
        ("example_100", 100, 10**9 + 7, SMALL_LIMIT),
        ("n_equals_m", 13, 13, SMALL_LIMIT),
        ("pisano_period_of_10", 60, 10, SMALL_LIMIT),
        ("huge_max_n", 10**18, 10**9, HUGE_LIMIT),
        ("huge_power_of_two", 2**59, 999999937, HUGE_LIMIT),
        ("huge_m_one", 10**18 - 1, 1, HUGE_LIMIT),
    ]
    rng = random.Random(1234)
    for i in range(10):
        cases.append((f"small_{i:02d}", rng.randint(0, 2000), rng.randint(1, 10**9), SMALL_LIMIT))
    for i in range(3):
        n = rng.randint(10**15, 10**18)
        cases.append((f"huge_{i:02d}", n, rng.randint(2, 10**9), HUGE_LIMIT))
    return cases


def _expected_cases():
    out = []
    for case_id, n, m, limit in _cases():
        expected = _matrix_fib(n, m)
        if n <= 2000 and _loop_fib(n, m) != expected:
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        out.append((case_id, n, m, limit, expected))
    return out


def verify(solution_path, test_cases_path=None):
    cases = _expected_cases()
    records = {}
    for limit in sorted({case[3] for case in cases}, reverse=True):
        group = [(case_id, (n, m), expected)
                 for case_id, n, m, case_limit, expected in cases if case_limit == limit]
        # Each case has its own limit, so a timeout fails that case only: no skipping.
        result = score_cases(solution_path, "fib_mod", group, timeout=limit,
                             stop_after_timeout=False, extra={"timeout": limit})
        records.update((record["id"], record) for record in result["cases"])
    return summarize([records[case_id] for case_id, *_ in cases])
