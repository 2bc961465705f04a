"""Verifier for word_frequency_cli: runs the solution as a script, once per case.

Each case feeds a text on stdin and K as the argument through ``run_solution`` and compares the
printed lines (trailing spaces and the final newline ignored) with the verifier's own count,
made by scanning characters rather than with a regular expression.
"""

import random

from deepgym_cases import run_cases, summarize
from deepgym_solution import run_solution

_LETTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _expected_lines(text, k):
    counts, word = {}, []
    for ch in text + " ":
        if ch in _LETTERS:
            word.append(ch.lower())
        elif word:
            key = "".join(word)
            counts[key] = counts.get(key, 0) + 1
            word = []
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [f"{w} {c}" for w, c in ranked[:k]]


def _random_text(rng, n_words):
    vocabulary = ["alpha", "beta", "Gamma", "delta", "EPSILON", "zeta", "eta", "theta", "a", "I"]
    separators = [" ", " ", "\n", ", ", ". ", "--", "'", "3", "\t", " é "]
    parts = []
    for _ in range(n_words):
        word = rng.choice(vocabulary)
        parts.append(word.upper() if rng.random() < 0.1 else word)
        parts.append(rng.choice(separators))
    return "".join(parts)


def _cases():
    cases = [
        ("example", "The cat and the hat. THE END, and... the cat?", 2),
        ("k_zero", "some words here", 0),
        ("empty_input", "", 5),
        ("no_words", "123 ... !!! 456\n", 3),
        ("fewer_words_than_k", "b a b", 10),
        ("ties_alphabetical", "pear apple fig apple pear fig", 3),
        ("apostrophe_splits", "don't can't won't", 4),
        ("unicode_separates", "naïve café naïve", 5),
    ]
    rng = random.Random(1234)
    for i in range(2):  # few cases: each one starts the script afresh
        cases.append((f"random_{i:02d}", _random_text(rng, rng.randint(5, 300)), rng.randint(1, 8)))
    cases.append(("large_input", _random_text(rng, 20000), 6))
    return cases


def _printed_lines(solution_path, text, k):
    run = run_solution(solution_path, args=[str(k)], stdin=text)  # case_timeout
    if run.timed_out:
        raise TimeoutError("the program did not finish in time")
    if run.exit_code != 0:
        raise RuntimeError(f"exit status {run.exit_code}: {run.stderr[-150:]}")
    lines = [line.rstrip() for line in run.stdout.rstrip("\n").split("\n")]
    return [] if lines == [""] else lines


def verify(solution_path, test_cases_path=None):
    cases = [(cid, (text, k), _expected_lines(text, k)) for cid, text, k in _cases()]
    return summarize(run_cases(lambda text, k: _printed_lines(solution_path, text, k), cases))
