"""Verifier for longest_increasing_subsequence: any valid longest answer is accepted.

Many answers can be right, so each returned list is checked for its properties (plain ints,
strictly increasing, a subsequence of the input, as long as the verifier's own optimum).
"""

import random
from bisect import bisect_left

from deepgym_solution import load_solution


def _lis_length(nums):
    tails = []
    for value in nums:
        k = bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
        else:
            tails[k] = value
    return len(tails)


def _problem(nums, got, best):
    """Why ``got`` is not a longest increasing subsequence of ``nums`` (None when it is one)."""
    if type(got) is not list or any(type(x) is not int for x in got):
        return f"expected a list of int, got {type(got).__name__}"
    if len(got) != best:
        return f"length {len(got)}, the longest is {best}"
    if any(a >= b for a, b in zip(got, got[1:], strict=False)):
        return "not strictly increasing"
    position = 0
    for value in got:  # greedy subsequence match
        while position < len(nums) and nums[position] != value:
            position += 1
        if position == len(nums):
            return "not a subsequence of the input"
        position += 1
    return None


def _cases():
    cases = [
        ("empty", []),
        ("single", [5]),
        ("all_equal", [7, 7, 7, 7]),
        ("decreasing", [5, 4, 3, 2, 1]),
        ("increasing", list(range(-3, 12))),
        ("example", [10, 9, 2, 5, 3, 7, 101, 18]),
        ("negatives", [-1, -5, -3, -4, -2, 0]),
        ("plateaus", [1, 2, 2, 3, 3, 4]),
    ]
    rng = random.Random(1234)
    for i in range(12):
        n = rng.randint(1, 40)
        cases.append((f"random_{i:02d}", [rng.randint(-20, 20) for _ in range(n)]))
    for i in range(3):
        n = rng.randint(1500, 2000)
        cases.append((f"large_{i}", [rng.randint(-10**6, 10**6) for _ in range(n)]))
    return cases


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, nums, _lis_length(nums)) for case_id, nums in _cases()]
    load_error = None
    try:
        solution = load_solution(solution_path)
    except Exception as exc:
        solution, load_error = None, f"could not load the solution: {type(exc).__name__}: {exc}"
    results = []
    for case_id, nums, best in cases:
        if solution is None:
            ok, note = False, load_error
        else:
            try:
                got = solution.longest_increasing_subsequence(list(nums))
                problem = _problem(nums, got, best)
                ok, note = problem is None, (problem or "")[:200]
            except Exception as exc:
                ok, note = False, f"{type(exc).__name__}: {exc}"[:200]
        results.append({"id": case_id, "passed": ok, "score": 1.0 if ok else 0.0, "error": note})
    n_passed = sum(case["passed"] for case in results)
    return {
        "score": n_passed / len(results),
        "passed": n_passed == len(results),
        "details": f"{n_passed}/{len(results)} cases passed",
        "cases": results,
    }
