def _distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, or anything above ``limit`` once it is sure to exceed it."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ch in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ch != other)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def suggest(word: str, dictionary: list[str]) -> str:
    best_word, best = None, None
    for candidate in sorted(dictionary):
        limit = best - 1 if best is not None else len(word) + len(candidate)
        d = _distance(word, candidate, limit)
        if d <= limit:  # strictly better than the best so far (ties keep the earlier word)
            best_word, best = candidate, d
            if best == 0:
                break
    return best_word
