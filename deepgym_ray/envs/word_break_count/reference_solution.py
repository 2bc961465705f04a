def count_segmentations(s: str, words: list[str]) -> int:
    # ways[i] = number of splits of the prefix s[:i].
    vocabulary = set(words)
    lengths = sorted({len(w) for w in vocabulary})
    ways = [1] + [0] * len(s)
    for i in range(1, len(s) + 1):
        for length in lengths:
            if length > i:
                break
            if s[i - length:i] in vocabulary:
                ways[i] += ways[i - length]
    return ways[len(s)]
