"""Verifier for longest_increasing_subsequence: any valid longest answer is accepted.

Many answers can be right, so each returned list is checked for its properties (plain ints,
strictly increasing, a subsequence of the input, as long as the verifier's own optimum).
"""

import random
from bisect import bisect_left

from deepgym_cases import score_cases


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


def _check(got, expected):
    nums, best = expected
    return _problem(nums, got, best) or True


def verify(solution_path, test_cases_path=None):
    # The solution gets a copy: the check reads ``nums`` after the call.
    cases = [(case_id, (nums[:],), (nums, _lis_length(nums))) for case_id, nums in _cases()]
    return score_cases(solution_path, "longest_increasing_subsequence", cases, check=_check)
