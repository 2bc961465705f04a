"""Judges the agent's calculator.py with cases it never saw (its code runs in a solution
process, through load_solution)."""

import math
import os

from deepgym_solution import load_solution

CASES = [
    ("add", (2, 3), 5), ("add", (-4, 1.5), -2.5),
    ("divide", (7, 2), 3.5), ("divide", (-9, 4), -2.25), ("divide", (1, 3), 1 / 3),
    ("power", (2, 3), 8), ("power", (5, 0), 1), ("power", (3, 1), 3), ("power", (-2, 5), -32),
    ("mean", ([1, 2, 3],), 2), ("mean", ([4],), 4), ("mean", ([1.5, 2.5, 5],), 3),
]


def verify(work_dir, test_cases_path=None):
    calculator = load_solution(os.path.join(work_dir, "calculator.py"))
    passed, failures = 0, []
    for name, args, expected in CASES:
        try:
            got = getattr(calculator, name)(*args)
            ok = isinstance(got, (int, float)) and math.isclose(got, expected, rel_tol=1e-9)
        except Exception as exc:  # noqa: BLE001 - a wrong answer, named below
            got, ok = f"{type(exc).__name__}", False
        if ok:
            passed += 1
        else:
            failures.append(f"{name}{args} gave {got!r}, expected {expected!r}")
    raises = 0
    for name, args, error in (("divide", (1, 0), ZeroDivisionError), ("mean", ([],), ValueError)):
        try:
            getattr(calculator, name)(*args)
            failures.append(f"{name}{args} did not raise {error.__name__}")
        except error:
            raises += 1
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{name}{args} raised {type(exc).__name__}, not {error.__name__}")
    total = len(CASES) + 2
    score = (passed + raises) / total
    return {"score": score, "passed": score == 1.0,
            "details": "; ".join(failures[:5]) or f"all {total} checks passed"}
