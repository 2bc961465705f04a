"""Reads report.json from the agent's work directory (plain data: no code of the agent's runs)
and compares it with the totals in test_cases.json, which the agent never sees."""

import json
import math
import os


def verify(work_dir, test_cases_path=None):
    with open(test_cases_path) as f:
        expected = json.load(f)[0]
    path = os.path.join(work_dir, "report.json")
    try:
        with open(path, "rb") as f:
            report = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return {"score": 0.0, "passed": False, "details": "no report.json"}
    except ValueError as exc:
        return {"score": 0.0, "passed": False, "details": f"report.json is not JSON: {exc}"}
    if not isinstance(report, dict):
        return {"score": 0.0, "passed": False, "details": "report.json is not a JSON object"}
    right = [key for key, total in expected.items()
             if isinstance(report.get(key), (int, float)) and not isinstance(report[key], bool)
             and math.isclose(report[key], total, abs_tol=0.005)]
    extra = sorted(set(report) - set(expected))
    score = len(right) / len(expected) * (0.5 if extra else 1.0)
    wrong = sorted(set(expected) - set(right))
    details = (f"wrong or missing: {', '.join(wrong)}" if wrong else "every total is right") \
        + (f"; unexpected keys: {', '.join(extra[:5])}" if extra else "")
    return {"score": score, "passed": score == 1.0, "details": details}
