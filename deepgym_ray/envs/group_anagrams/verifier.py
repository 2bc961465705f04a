"""Verifier for group_anagrams: groups are compared order-free, after strict type checks.

The verifier groups words by their letter counts (not by sorting, so its method differs from
the obvious solution) and compares canonical forms: each group sorted, the groups sorted.
"""

import random
from collections import Counter

from deepgym_cases import score_cases


def _canonical(groups):
    return sorted(sorted(group) for group in groups)


def _expected(words):
    groups = {}
    for word in words:
        groups.setdefault(frozenset(Counter(word).items()), []).append(word)
    return _canonical(groups.values())


def _well_typed(got):
    return type(got) is list and all(
        type(group) is list and group and all(type(word) is str for word in group)
        for group in got
    )


def _cases():
    cases = [
        ("empty", []),
        ("single", ["abc"]),
        ("example", ["eat", "tea", "tan", "ate", "nat", "bat"]),
        ("empty_words", ["", ""]),
        ("empty_and_letters", ["", "a", ""]),
        ("duplicates", ["ab", "ba", "ab"]),
        ("same_letters_other_counts", ["aab", "abb", "bab", "aba"]),
        ("no_anagrams", ["abc", "abd", "abe"]),
    ]
    rng = random.Random(1234)
    for i in range(12):
        bases = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 5))) for _ in range(8)]
        words = []
        for _ in range(rng.randint(1, 60 if i < 10 else 500)):
            letters = list(rng.choice(bases))
            rng.shuffle(letters)
            words.append("".join(letters))
        cases.append((f"random_{i:02d}", words))
    return cases


def _check(got, expected):
    if not _well_typed(got):
        return f"expected a list of non-empty lists of str, got {got!r}"
    return _canonical(got) == expected or f"wrong grouping: {got!r}"


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, (words,), _expected(words)) for case_id, words in _cases()]
    return score_cases(solution_path, "group_anagrams", cases, check=_check)
