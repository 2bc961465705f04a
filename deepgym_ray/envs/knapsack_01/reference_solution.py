def knapsack(weights: list[int], values: list[int], capacity: int) -> int:
    # best[c] = best value within capacity c; iterate capacities downwards so each item is
    # used at most once.
    best = [0] * (capacity + 1)
    for weight, value in zip(weights, values, strict=False):
        for c in range(capacity, weight - 1, -1):
            best[c] = max(best[c], best[c - weight] + value)
    return best[capacity]
