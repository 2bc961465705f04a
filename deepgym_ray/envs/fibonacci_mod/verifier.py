"""Verifier for fibonacci_mod. Every case carries its own time limit.

Small cases get a generous limit; huge ``n`` gets about a second, which only an O(log n)
method meets. Cases are run grouped by limit, each group through a solution proxy whose
per-call timeout is that limit (``load_solution(path, timeout=...)``); a call that runs past
it fails that case only. Expected values come from 2x2 matrix powers, cross-checked with a
plain loop for small ``n``.
"""

import random

from deepgym_solution import load_solution

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


def _run_case(solution, n, m, expected):
    try:
        got = solution.fib_mod(n, m)
    except TimeoutError as exc:
        return False, f"timed out: {exc}"
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if type(got) is int and got == expected:
        return True, ""
    return False, f"fib_mod({n}, {m}): expected {expected}, got {got!r}"


def verify(solution_path, test_cases_path=None):
    cases = _expected_cases()
    outcome = {}
    for limit in sorted({case[3] for case in cases}, reverse=True):
        try:
            solution = load_solution(solution_path, timeout=limit)
        except Exception as exc:
            solution, error = None, f"could not load the solution: {type(exc).__name__}: {exc}"
        for case_id, n, m, case_limit, expected in cases:
            if case_limit != limit:
                continue
            if solution is None:
                outcome[case_id] = (False, error)
            else:
                outcome[case_id] = _run_case(solution, n, m, expected)
    results = []
    for case_id, _, _, limit, _ in cases:
        ok, note = outcome[case_id]
        results.append({"id": case_id, "passed": ok, "score": 1.0 if ok else 0.0,
                        "timeout": limit, "error": note[:200]})
    n_passed = sum(case["passed"] for case in results)
    return {
        "score": n_passed / len(results),
        "passed": n_passed == len(results),
        "details": f"{n_passed}/{len(results)} cases passed",
        "cases": results,
    }
