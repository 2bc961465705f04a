"""Verifier for fraction_to_decimal: edge cases plus seeded random fractions.

The expected text is built by number theory, not long division: after removing the factors 2
and 5 of the reduced denominator, the length of the non-repeating part is the larger of their
exponents and the period is the multiplicative order of 10 modulo what remains. Every answer is
also parsed back into a fraction and compared, as a self-check.
"""

import random
from fractions import Fraction

from deepgym_cases import score_cases


def _order_of_ten(modulus):
    if modulus == 1:
        return 0
    k, value = 1, 10 % modulus
    while value != 1:
        value, k = value * 10 % modulus, k + 1
    return k


def _expected(numerator, denominator):
    value = Fraction(numerator, denominator)
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, rest = divmod(value.numerator, value.denominator)
    if rest == 0:
        return f"{sign}{whole}"
    d, twos, fives = value.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    lead, period = max(twos, fives), _order_of_ten(d)
    digits = str(rest * 10 ** (lead + period) // value.denominator).zfill(lead + period)
    fraction = digits[:lead] + (f"({digits[lead:]})" if period else "")
    return f"{sign}{whole}.{fraction}"


def _parse(text):
    """The fraction a well-formed answer stands for (for the self-check)."""
    negative = text.startswith("-")
    text = text.lstrip("-")
    whole, _, fraction = text.partition(".")
    lead, _, repeat = fraction.partition("(")
    repeat = repeat.rstrip(")")
    value = Fraction(int(whole)) + (Fraction(int(lead), 10 ** len(lead)) if lead else 0)
    if repeat:
        value += Fraction(int(repeat), (10 ** len(repeat) - 1) * 10 ** len(lead))
    return -value if negative else value


def _cases():
    cases = [
        ("half", 1, 2), ("integer", 2, 1), ("zero_over_negative", 0, -5),
        ("example_012", 4, 333), ("mixed_repeat", 1, 6), ("negative_pi_ish", -22, 7),
        ("both_negative", -1, -3), ("negative_denominator", 1, -4), ("one_seventeenth", 1, 17),
        ("unreduced", 50, 100), ("long_period", 1, 9973), ("extreme", -(10**9), 1),
        ("big_denominator", 1, 10**9), ("min_over_minus_one", -(10**9), -1),
    ]
    rng = random.Random(1234)
    for i in range(10):
        denominator = rng.choice([rng.randint(1, 50), rng.randint(1, 5000)]) * rng.choice([1, -1])
        cases.append((f"random_{i:02d}", rng.randint(-(10**6), 10**6), denominator))
    return cases


def _expected_cases():
    out = []
    for case_id, numerator, denominator in _cases():
        expected = _expected(numerator, denominator)
        if _parse(expected) != Fraction(numerator, denominator):
            raise AssertionError(f"verifier self-check failed on case {case_id}")
        out.append((case_id, (numerator, denominator), expected))
    return out


def verify(solution_path, test_cases_path=None):
    return score_cases(solution_path, "fraction_to_decimal", _expected_cases())
