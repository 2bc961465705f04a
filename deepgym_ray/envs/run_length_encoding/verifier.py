"""Verifier for run_length_encoding: each case checks encode on a text or decode on an encoding.

The verifier encodes with its own regular-expression implementation; decode cases feed it the
verifier's encodings of seeded random texts.
"""

import random
import re

from deepgym_cases import call_named, score_cases


def _encode(text):
    return "".join(f"{len(m.group(0))}{m.group(1)}" for m in re.finditer(r"([A-Za-z])\1*", text))


def _random_text(rng, max_runs):
    runs = []
    for _ in range(rng.randint(1, max_runs)):
        letter = rng.choice("abcXYZ")
        if runs and runs[-1][0] == letter:
            continue
        runs.append((letter, rng.choice([1, 1, 2, 3, 9, 10, 11, 27, 100])))
    return "".join(letter * count for letter, count in runs)


def _cases():
    """(id, function name, argument, expected) for every case."""
    texts = [
        ("empty", ""),
        ("single", "a"),
        ("example", "aaabcc"),
        ("no_repeats", "abcdef"),
        ("two_digit_run", "a" * 12),
        ("case_matters", "aAaA"),
        ("long_run_then_single", "b" * 105 + "c"),
    ]
    rng = random.Random(1234)
    texts += [(f"random_{i:02d}", _random_text(rng, 12)) for i in range(8)]
    cases = [(f"encode_{cid}", "encode", text, _encode(text)) for cid, text in texts]
    cases += [(f"decode_{cid}", "decode", _encode(text), text) for cid, text in texts]
    return cases


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, (function, argument), expected)
             for case_id, function, argument, expected in _cases()]
    return score_cases(solution_path, call_named, cases)
