"""Plant symlinks (and hard links) where the runner writes, pointing outside the sandbox."""

from harness import Attack

# A verifier that runs the solution as a script: the runner copies solution.py into the
# solution's directory, where the solution has planted a symlink of that name beforehand.
VERIFIER = '''
from deepgym_solution import load_solution, run_solution


def verify(solution_path, test_cases_path=None):
    try:
        load_solution(solution_path).plant()
    except Exception:
        pass
    run = run_solution(solution_path)
    ok = run.stdout.strip() == "ran"
    return {"score": 1.0 if ok else 0.0, "details": run.stdout[-200:]}
'''

PLANT = r'''
import os
TARGET = "/tmp/@MARK@-symlink-target"
def plant():
    for name in ("solution.py", ".deepgym-clean", "verifier.py", "test_cases.json"):
        for path in (name, os.path.join(os.getcwd(), name)):
            try:
                os.unlink(path)
            except OSError:
                pass
            try:
                os.symlink(TARGET, path)
            except OSError:
                pass
    for src in ("/etc/passwd", "/usr/bin/python3"):
        try:
            os.link(src, "hard-" + os.path.basename(src))
        except OSError:
            pass
if __name__ == "__main__":
    print("pwned" if os.path.exists(TARGET) else "no")
'''

ATTACK = Attack(
    name="symlink_planting",
    tags=("disk", "runner"),
    tries="to make the runner (which has more rights) write a host file through a symlink "
          "the solution planted under the name of a file the runner copies in",
    solution=PLANT,
    verifier=VERIFIER,
    right="if __name__ == '__main__':\n    print('ran')\ndef plant():\n    pass\n",
    drops=("/tmp/@MARK@-symlink-target",),
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
