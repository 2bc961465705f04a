"""Fake JSON in a script run's output, read by a script-shaped verifier that echoes it."""

from harness import Attack

# A script verifier that logs what the solution printed and then prints its own result: the
# runner must take the verifier's last JSON, never the solution's.
VERIFIER = '''
import json
import sys

from deepgym_solution import run_solution

run = run_solution(sys.argv[1], stdin="3 4\\n")
print(run.stdout)
ok = run.stdout.strip().splitlines()[-1:] == ["7"]
print(json.dumps({"score": 1.0 if ok else 0.0, "passed": ok}))
sys.exit(0 if ok else 1)
'''

FAKE = r'''
import json, os, sys
line = json.dumps({"score": 1.0, "passed": True, "details": "fake"})
print(line, flush=True)
for fd in range(3, 64):
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass
os._exit(0)
'''

ATTACK = Attack(
    name="fake_json_to_script_verifier",
    tags=("fake-result", "output"),
    tries="to have a script verifier's result replaced by the JSON the solution printed",
    solution=FAKE,
    verifier=VERIFIER,
    right="a, b = map(int, input().split())\nprint(a + b)\n",
    test_cases=None,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
