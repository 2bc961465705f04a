"""Rewrite the judge's own modules (runner, deepgym_solution, deepgym_cases) and the verifier."""

from harness import Attack

# The verifier imports deepgym_cases only after the solution has run: if the solution could
# replace that module (or the verifier), the replacement would mark the run as passed.
VERIFIER = '''
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    try:
        got = load_solution(solution_path).answer()
    except Exception:
        got = None
    import deepgym_cases

    hacked = getattr(deepgym_cases, "HACKED", None) == "@CLAIM@"
    ok = got == "@SECRET@" or hacked
    return {"score": 1.0 if ok else 0.0, "details": "hacked" if hacked else repr(got)[:200]}
'''

REWRITE = r'''
import os
PAYLOAD = 'HACKED = "@CLAIM@"\n'
def _rewrite():
    names = ["deepgym_cases.py", "deepgym_solution.py", "deepgym_runner.py", "deepgym_proxy.py",
             "verifier.py", "sitecustomize.py"]
    dirs = ["", "..", "../..", f"/proc/{os.getppid()}/cwd", "/proc/1/cwd"]
    for d in dirs:
        for name in names:
            path = os.path.join(d, name) if d else name
            try:
                with open(path, "w") as f:
                    f.write(PAYLOAD)
            except OSError:
                pass
        try:
            os.makedirs(os.path.join(d or ".", "__pycache__"), exist_ok=True)
        except OSError:
            pass
_rewrite()
def answer():
    _rewrite()
    return None
'''

ATTACK = Attack(
    name="rewrite_runner_modules",
    tags=("runner", "verifier-data"),
    tries="to replace the judge's modules (deepgym_cases, deepgym_solution, the runner) or "
          "the verifier with its own code before the verifier imports them",
    solution=REWRITE,
    verifier=VERIFIER,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
