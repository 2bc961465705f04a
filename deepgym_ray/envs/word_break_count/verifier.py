"""Verifier for word_break_count: edge cases plus seeded random strings built from words.

Counts grow exponentially on strings like "aaaa...", so exponential solutions time out and
solutions that cap or wrap the count fail.
"""

import random

from deepgym_cases import score_cases


def _count(s, words):
    vocabulary = set(words)
    ways = [1] + [0] * len(s)
    for end in range(1, len(s) + 1):
        for start in range(end):
            if ways[start] and s[start:end] in vocabulary:
                ways[end] += ways[start]
    return ways[len(s)]


def _cases():
    cases = [
        ("empty_string", "", []),
        ("empty_string_with_words", "", ["a"]),
        ("no_words", "abc", []),
        ("example_cats", "catsanddog", ["cat", "cats", "and", "sand", "dog"]),
        ("example_aaa", "aaa", ["a", "aa"]),
        ("impossible", "abc", ["ab"]),
        ("word_is_whole_string", "pineapple", ["pineapple", "pine", "apple", "pen"]),
        ("huge_count", "a" * 150, ["a", "aa", "aaa"]),
        ("prefix_only", "leetcodes", ["leet", "code"]),
    ]
    rng = random.Random(1234)
    syllables = ["a", "b", "ab", "ba", "aba", "bab", "c", "ca", "abc", "bca"]
    for i in range(14):
        words = rng.sample(syllables, rng.randint(2, 6))
        pieces = [rng.choice(words) for _ in range(rng.randint(1, 25))]
        s = "".join(pieces)
        if i % 4 == 3:  # a stray letter usually makes the string impossible to split
            position = rng.randint(0, len(s))
            s = s[:position] + "z" + s[position:]
        cases.append((f"random_{i:02d}", s, words))
    # Strings with many splits each: the commonest count above is 1, and an answer that gives
    # it (or the task's examples by heart) must not score half.
    ambiguous = ["a", "b", "ab", "ba", "aba"]
    for i in range(12):
        s = "".join(rng.choice(ambiguous) for _ in range(rng.randint(4, 20)))
        cases.append((f"many_ways_{i:02d}", s, ambiguous))
    return cases


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, (s, words), _count(s, words)) for case_id, s, words in _cases()]
    return score_cases(solution_path, "count_segmentations", cases)
