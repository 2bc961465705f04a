def two_sum(nums, target):
    seen = {}  # value -> its first index
    for j, value in enumerate(nums):
        if target - value in seen:
            return [seen[target - value], j]
        seen.setdefault(value, j)
    return []
