def max_subarray_sum(nums: list[int]) -> int:
    # Kadane: the best sum ending here either extends the previous run or starts afresh.
    best = current = nums[0]
    for value in nums[1:]:
        current = max(value, current + value)
        best = max(best, current)
    return best
