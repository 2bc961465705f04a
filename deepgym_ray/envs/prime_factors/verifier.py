# ruff: noqa: F706, F821 - a bare function body: solution_path is its parameter
# Prime factors: a bare function body. The runner wraps it as
# verify(solution_path, test_cases_path=None); the value returned is the score.
import math

from deepgym_solution import load_solution

numbers = [2, 3, 4, 12, 97, 360, 1024, 9973 * 9973, 600851475143, 2 ** 31 - 1,
           999999000001, 3 * 5 * 7 * 11 * 13 * 17 * 19, 987654321012]
try:
    sol = load_solution(solution_path)
except Exception:
    return 0.0
good = 0
for n in numbers:
    try:
        got = sol.factorize(n)
    except Exception:
        continue
    # A correct answer multiplies back to n, is sorted, and every factor is prime.
    if (type(got) is list and got == sorted(got) and all(type(f) is int for f in got)
            and math.prod(got) == n
            and all(f > 1 and all(f % d for d in range(2, math.isqrt(f) + 1)) for f in got)):
        good += 1
return good / len(numbers)
