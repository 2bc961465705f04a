def coin_change(coins, amount):
    best = [0] + [None] * amount
    for total in range(1, amount + 1):
        options = [best[total - c] for c in coins if c <= total and best[total - c] is not None]
        best[total] = min(options) + 1 if options else None
    return -1 if best[amount] is None else best[amount]
