"""Verifier for word_frequency_cli: runs the solution as a script, once per case.

Each case feeds a text on stdin and K as the argument through ``run_solution`` and compares the
printed lines (trailing spaces and the final newline ignored) with the verifier's own count,
made by scanning characters rather than with a regular expression.
"""

import random

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


def verify(solution_path, test_cases_path=None):
    cases = [(cid, text, k, _expected_lines(text, k)) for cid, text, k in _cases()]
    results = []
    for case_id, text, k, expected in cases:
        try:
            run = run_solution(solution_path, args=[str(k)], stdin=text)  # case_timeout
            lines = [line.rstrip() for line in run.stdout.rstrip("\n").split("\n")]
            lines = [] if lines == [""] else lines
            if run.timed_out:
                ok, note = False, "timed out"
            elif run.exit_code != 0:
                ok, note = False, f"exit status {run.exit_code}: {run.stderr[-150:]}"
            else:
                ok = lines == expected
                note = "" if ok else f"expected {expected!r}, printed {lines!r}"
        except Exception as exc:
            ok, note = False, f"{type(exc).__name__}: {exc}"
        results.append({"id": case_id, "passed": ok, "score": 1.0 if ok else 0.0,
                        "error": note[:200]})
    n_passed = sum(case["passed"] for case in results)
    return {
        "score": n_passed / len(results),
        "passed": n_passed == len(results),
        "details": f"{n_passed}/{len(results)} cases passed",
        "cases": results,
    }
