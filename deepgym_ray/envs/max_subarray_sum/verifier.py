"""Verifier for max_subarray_sum, written as a script that prints its JSON result.

Run as ``python verifier.py SOLUTION_PATH``. Expected sums come from prefix sums (a different
method from Kadane's), cross-checked by brute force on small inputs.
"""

import json
import random
import sys

from deepgym_cases import score_cases


def _best_by_prefix_sums(nums):
    best, prefix, lowest_prefix = nums[0], 0, 0
    for value in nums:
        prefix += value
        best = max(best, prefix - lowest_prefix)
        lowest_prefix = min(lowest_prefix, prefix)
    return best


def _brute_force(nums):
    return max(sum(nums[i:j]) for i in range(len(nums)) for j in range(i + 1, len(nums) + 1))


def _cases():
    cases = [
        ("single_positive", [5]),
        ("single_negative", [-7]),
        ("example", [-2, 1, -3, 4, -1, 2, 1, -5, 4]),
        ("all_negative", [-3, -1, -2]),
        ("all_zero", [0, 0, 0]),
        ("whole_array", [1, 2, 3, 4]),
        ("negative_then_zero", [-5, 0, -1]),
        ("big_numbers", [10**9, -1, 10**9, -(10**9), 10**9]),
    ]
    rng = random.Random(1234)
    for i in range(12):
        nums = [rng.randint(-50, 50) for _ in range(rng.randint(1, 40))]
        cases.append((f"random_{i:02d}", nums))
    for i in range(3):
        nums = [rng.randint(-(10**9), 10**9) for _ in range(20000)]
        cases.append((f"large_{i}", nums))
    return cases


def main(solution_path):
    cases = []
    for case_id, nums in _cases():
        expected = _best_by_prefix_sums(nums)
        if len(nums) <= 40 and _brute_force(nums) != expected:
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        cases.append((case_id, (nums,), expected))
    return score_cases(solution_path, "max_subarray_sum", cases)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
