# Verifier for merge_intervals, written as a bare function body: the judge wraps it in
# ``def verify(solution_path, test_cases_path=None):``. The expected answer comes from a sweep
# over start/end events, a different method from the usual sort-and-extend.
import random

from deepgym_cases import score_cases


def merged_by_sweep(intervals):
    events = sorted([(s, 0) for s, _ in intervals] + [(e, 1) for _, e in intervals])
    out, depth, start = [], 0, None
    for position, kind in events:  # starts sort before ends at the same point: touching merges
        if kind == 0:
            if depth == 0:
                if out and out[-1][1] == position:
                    start = out.pop()[0]
                else:
                    start = position
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                out.append([start, position])
    return out


cases = [
    ("empty", []),
    ("single", [[5, 5]]),
    ("example", [[1, 3], [2, 6], [8, 10], [15, 18]]),
    ("touching", [[1, 4], [4, 5]]),
    ("gap_of_one", [[1, 3], [4, 6]]),
    ("nested", [[1, 10], [2, 3], [4, 5]]),
    ("unsorted", [[8, 9], [1, 2], [5, 6], [2, 5]]),
    ("duplicates", [[1, 2], [1, 2], [1, 2]]),
    ("negatives", [[-10, -5], [-6, 0], [3, 3]]),
]
rng = random.Random(1234)
for i in range(12):
    intervals = []
    for _ in range(rng.randint(1, 30)):
        start = rng.randint(-50, 50)
        intervals.append([start, start + rng.randint(0, 8)])
    cases.append((f"random_{i:02d}", intervals))
for i in range(2):
    intervals = []
    for _ in range(5000):
        start = rng.randint(-(10**9), 10**9 - 10**6)
        intervals.append([start, start + rng.randint(0, 10**6)])
    cases.append((f"large_{i}", intervals))
# score_cases compares strictly: a list of [int, int] lists, exactly the expected ones.
return score_cases(  # noqa: F706 - the judge runs this file as a function body
    solution_path,  # noqa: F821 - a parameter of the wrapping function
    "merge_intervals",
    [(case_id, (intervals,), merged_by_sweep(intervals)) for case_id, intervals in cases],
)
