from bisect import bisect_left


def longest_increasing_subsequence(nums: list[int]) -> list[int]:
    # Patience sorting: tails[k] is the index of the smallest tail of an increasing run of
    # length k + 1; parents let us walk the best run back. O(n log n).
    tails: list[int] = []
    tail_values: list[int] = []
    parent = [-1] * len(nums)
    for i, value in enumerate(nums):
        k = bisect_left(tail_values, value)
        if k > 0:
            parent[i] = tails[k - 1]
        if k == len(tails):
            tails.append(i)
            tail_values.append(value)
        else:
            tails[k] = i
            tail_values[k] = value
    result = []
    i = tails[-1] if tails else -1
    while i != -1:
        result.append(nums[i])
        i = parent[i]
    return result[::-1]
