"""Judges a two-sum answer with every function of the verifier runtime."""

import os

from deepgym_solution import (
    apply_patch,
    consulted,
    load_files,
    load_solution,
    read_output,
    read_output_bytes,
    run_solution,
    solution_namespace,
    solution_source,
)

CASES = [([2, 7, 11, 15], 9, [0, 1]), ([3, 2, 4], 6, [1, 2]), ([3, 3], 6, [0, 1])]

# A harness module loaded beside the answer's file; the patch adds the third case to it.
HARNESS = """from solution import two_sum

PAIRS = [two_sum([2, 7, 11, 15], 9), two_sum([3, 2, 4], 6)]
"""
PATCH = """--- a/harness.py
+++ b/harness.py
@@ -1,3 +1,3 @@
 from solution import two_sum

-PAIRS = [two_sum([2, 7, 11, 15], 9), two_sum([3, 2, 4], 6)]
+PAIRS = [two_sum([2, 7, 11, 15], 9), two_sum([3, 2, 4], 6), two_sum([3, 3], 6)]
"""


def verify(solution_path, test_cases_path=None):
    checks = {"not consulted yet": not consulted()}
    source = solution_source(solution_path, "two_sum")
    checks["consulted"] = consulted()
    checks["a def two_sum"] = source.lstrip().startswith("def two_sum")

    solution = load_solution(solution_path)
    names = solution_namespace(solution)
    checks["public names"] = "two_sum" in names and callable(names["two_sum"])
    checks["calls"] = all(solution.two_sum(nums, t) == want for nums, t, want in CASES)

    run = run_solution(solution_path, stdin="2 7 11 15\n9\n")
    checks["script"] = (run.exit_code, run.stdout.strip(), run.timed_out) == (0, "0 1", False)
    root = os.path.dirname(solution_path)
    try:
        written = read_output("answer.txt", root)
        raw = read_output_bytes("answer.txt", root, 64)
    except OSError:
        written = raw = None
    checks["answer.txt"] = written == "0 1\n" and raw == b"0 1\n"

    with open(solution_path, encoding="utf-8") as f:
        files = apply_patch(PATCH, {"solution.py": f.read(), "harness.py": HARNESS})
    harness = load_files(files, "harness")
    checks["several files"] = harness.PAIRS == [want for _, _, want in CASES]

    failed = [name for name, ok in checks.items() if ok is not True]
    return {"score": 0.0 if failed else 1.0, "passed": not failed,
            "details": "failed: " + ", ".join(failed) if failed else "all checks passed"}
