"""Verifier for spelling_suggestions. The dictionary is a support file, words.txt, that sits
next to this verifier; the verifier reads it and hands the words to the solution.

Queries are edge cases plus seeded misspellings of dictionary words. The expected suggestion
is the verifier's own full-table Levenshtein distance to every word, ties broken alphabetically.
"""

import os
import random

from deepgym_cases import score_cases


def _dictionary():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "words.txt"), encoding="utf-8") as f:
        words = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    if len(set(words)) != len(words) or not all(w.isalpha() and w.islower() for w in words):
        raise AssertionError("words.txt must hold distinct lowercase words")
    return words


def _levenshtein(a, b):
    table = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1,
                              table[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return table[-1][-1]


def _expected(word, dictionary):
    best = None  # (distance, word)
    # The length difference is a lower bound on the distance: visiting candidates by it lets
    # the search stop once no remaining word can beat the best.
    for candidate in sorted(dictionary, key=lambda c: (abs(len(c) - len(word)), c)):
        if best is not None and abs(len(candidate) - len(word)) > best[0]:
            break
        best = min(best or (float("inf"), ""), (_levenshtein(word, candidate), candidate))
    return best[1]


def _misspell(rng, word, edits):
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(edits):
        i = rng.randrange(len(word) + 1)
        kind = rng.choice(["insert", "delete", "replace", "swap"])
        if kind == "insert" or not word:
            word = word[:i] + rng.choice(letters) + word[i:]
        elif kind == "delete":
            i = min(i, len(word) - 1)
            word = word[:i] + word[i + 1:]
        elif kind == "replace":
            i = min(i, len(word) - 1)
            word = word[:i] + rng.choice(letters) + word[i + 1:]
        elif len(word) > 1:
            i = min(i, len(word) - 2)
            word = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    return word[:20]


def _cases(dictionary):
    cases = [
        ("in_dictionary", "water"),
        ("empty_word", ""),
        ("one_letter", "q"),
        ("tie_goes_alphabetical", "bat"),
        ("transposition", "wrold"),
        ("far_from_everything", "zzzzzzzzzzzz"),
        # A stray first letter: the cheapest way is to delete it ("able", not "table"); a
        # table whose first column is off by one prefers the substitution.
        ("extra_first_letter", "xable"),
    ]
    rng = random.Random(1234)
    for i in range(14):
        cases.append((f"misspelled_{i:02d}", _misspell(rng, rng.choice(dictionary), 1 + i % 3)))
    return cases


def verify(solution_path, test_cases_path=None):
    dictionary = _dictionary()
    shuffled = list(dictionary)
    random.Random(1234).shuffle(shuffled)  # the solution may not rely on an order
    cases = [(case_id, (word, shuffled), _expected(word, dictionary), {"query": word})
             for case_id, word in _cases(dictionary)]
    return score_cases(solution_path, "suggest", cases)
