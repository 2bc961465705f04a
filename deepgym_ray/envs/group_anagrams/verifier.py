"""Verifier for group_anagrams: groups are compared order-free, after strict type checks.

The verifier groups words by their letter counts (not by sorting, so its method differs from
the obvious solution) and compares canonical forms: each group sorted, the groups sorted.
"""

import random
from collections import Counter

from deepgym_solution import load_solution


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


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, words, _expected(words)) for case_id, words in _cases()]
    load_error = None
    try:
        solution = load_solution(solution_path)
    except Exception as exc:
        solution, load_error = None, f"could not load the solution: {type(exc).__name__}: {exc}"
    results = []
    for case_id, words, expected in cases:
        if solution is None:
            ok, note = False, load_error
        else:
            try:
                got = solution.group_anagrams(list(words))
                if not _well_typed(got):
                    ok, note = False, f"expected a list of non-empty lists of str, got {got!r}"
                else:
                    ok = _canonical(got) == expected
                    note = "" if ok else f"wrong grouping: {got!r}"
                note = note[:200]
            except Exception as exc:
                ok, note = False, f"{type(exc).__name__}: {exc}"[:200]
        results.append({"id": case_id, "passed": ok, "score": 1.0 if ok else 0.0, "error": note})
    n_passed = sum(case["passed"] for case in results)
    return {
        "score": n_passed / len(results),
        "passed": n_passed == len(results),
        "details": f"{n_passed}/{len(results)} cases passed",
        "cases": results,
    }
