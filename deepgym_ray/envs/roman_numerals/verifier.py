"""Verifier for roman_numerals. Reports reward_components: one pass rate per direction.

The verifier builds numerals digit by digit from a table of the standard forms of each
decimal digit (a different method from greedy subtraction) and reads them back with that table.
"""

import random

from deepgym_cases import call_named, pass_rate, score_cases

_DIGIT_FORMS = [
    ["", "M", "MM", "MMM"],
    ["", "C", "CC", "CCC", "CD", "D", "DC", "DCC", "DCCC", "CM"],
    ["", "X", "XX", "XXX", "XL", "L", "LX", "LXX", "LXXX", "XC"],
    ["", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"],
]
_ALL = {}  # numeral -> number, for every number from 1 to 3999


def _roman(number):
    digits = f"{number:04d}"
    return "".join(forms[int(d)] for forms, d in zip(_DIGIT_FORMS, digits, strict=False))


def _numbers():
    edge = [1, 3, 4, 5, 9, 10, 14, 40, 49, 90, 99, 400, 444, 900, 999, 1994, 2024, 3888, 3999]
    rng = random.Random(1234)
    return edge + rng.sample(range(1, 4000), 8)


def _cases():
    if not _ALL:
        _ALL.update((_roman(n), n) for n in range(1, 4000))
        if len(_ALL) != 3999:
            raise AssertionError("verifier self-check failed: numerals are not unique")
    cases = []
    for number in _numbers():
        numeral = _roman(number)
        if _ALL[numeral] != number:
            raise AssertionError(f"verifier self-check failed on {number}")
        cases.append((f"to_roman_{number}", "to_roman", number, numeral))
        cases.append((f"from_roman_{numeral}", "from_roman", numeral, number))
    return cases


def verify(solution_path, test_cases_path=None):
    cases = [(case_id, (function, argument), expected, {"direction": function})
             for case_id, function, argument, expected in _cases()]
    result = score_cases(solution_path, call_named, cases)
    result["reward_components"] = {
        direction: pass_rate(result["cases"], direction=direction)
        for direction in ("to_roman", "from_roman")
    }
    return result
