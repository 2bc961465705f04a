def lcs_length(a: str, b: str) -> int:
    # One row of the classic table at a time: O(len(a) * len(b)) time, O(len(b)) memory.
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b):
            if ch == other:
                current.append(previous[j] + 1)
            else:
                current.append(max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]
