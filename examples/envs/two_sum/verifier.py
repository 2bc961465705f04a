"""Two sum: a module with verify(). The cases come from test_cases.json, plus one made here
(cases a verifier generates can sit beside the listed ones)."""

import json

from deepgym_cases import score_cases


def _cases(test_cases_path):
    with open(test_cases_path, encoding="utf-8") as handle:
        listed = json.load(handle)
    # (case_id, args, expected, fields reported with the case)
    cases = [(c["id"], (c["nums"], c["target"]), c["expected"],
              {"input": f"nums={c['nums']}, target={c['target']}"}) for c in listed]
    big = list(range(1, 2001))
    cases.append(("large", (big, 1999 + 2000), [1998, 1999], {"input": "nums=1..2000"}))
    return cases


def verify(solution_path, test_cases_path=None):
    # score_cases loads the solution (it runs in its own process), calls two_sum(*args) once per
    # case with the case timeout, compares with strict_equal (a tuple is not a list) and returns
    # {"score": fraction passed, "passed", "details": "k/n cases passed", "cases": [...]}.
    return score_cases(solution_path, "two_sum", _cases(test_cases_path))
