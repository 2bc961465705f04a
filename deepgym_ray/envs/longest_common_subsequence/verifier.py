"""Verifier for longest_common_subsequence: edge cases plus seeded random string pairs.

The expected lengths come from the verifier's own table; the solution only ever sees the inputs.
"""

import random

from deepgym_cases import score_cases


def _lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def _cases():
    cases = [
        ("empty_both", "", ""),
        ("empty_left", "", "abc"),
        ("empty_right", "abc", ""),
        ("identical", "banana", "banana"),
        ("disjoint", "abc", "xyz"),
        ("example", "abcde", "ace"),
        ("repeated_letter", "aaaa", "aa"),
        ("reversed", "abcdef", "fedcba"),
        ("case_sensitive", "ABC", "abc"),
    ]
    rng = random.Random(1234)
    for i in range(14):
        alphabet = "ab" if i < 4 else "abcdxyz"
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        cases.append((f"random_{i:02d}", a, b))
    long_a = "".join(rng.choice("acgt") for _ in range(300))
    long_b = "".join(rng.choice("acgt") for _ in range(300))
    cases.append(("long_dna", long_a, long_b))
    return cases


def verify(solution_path, test_cases_path=None):
    # Every expected answer is settled before the solution comes into play.
    cases = [(case_id, (a, b), _lcs(a, b)) for case_id, a, b in _cases()]
    return score_cases(solution_path, "lcs_length", cases)
