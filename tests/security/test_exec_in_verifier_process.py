"""The solution's text run in the verifier's own process, to forge the runner's verdict.

The verifier has a fallback some verifiers have: when the solution's process fails, it runs the
file itself (``exec(open(solution_path).read())``). The solution fails on purpose in its own
process (where the runner's objects are not to be found) so as to be run in the runner's, where
it looks for the result channel and its token through ``gc``, writes a passing final line on
it, and leaves with ``posix._exit(0)`` (and the other ways out). The code must never run there:
the run is the verifier's error, naming ``load_solution``.
"""

from harness import Attack

VERIFIER = '''
from deepgym_solution import load_solution

SECRET = "@SECRET@"
CLAIM = "@CLAIM@"


def verify(solution_path, test_cases_path=None):
    try:
        answer = load_solution(solution_path).answer
    except Exception:
        # The fallback: run the file here when its own process failed.
        namespace = {"__name__": "solution"}
        exec(open(solution_path).read(), namespace)
        answer = namespace["answer"]
    got = answer()
    ok = got == SECRET or got == CLAIM
    return {"score": 1.0 if ok else 0.0, "passed": ok, "details": repr(got)[:300]}
'''

FORGE = r'''
import gc, json, os, posix, signal

def _channel():
    for obj in gc.get_objects():
        try:
            if hasattr(obj, "token") and hasattr(obj, "fd") and hasattr(obj, "emit"):
                return obj
        except Exception:
            pass
    return None

_ch = _channel()
if _ch is None:  # the solution's own process: fail, so the verifier runs us in its own
    raise ImportError("try again elsewhere")
_line = {"kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0, "final": True,
         "in_play": True, "details": "forged"}
posix.write(_ch.fd, (_ch.token + " " + json.dumps(_line) + "\n").encode())
for _leave in (lambda: posix._exit(0), lambda: os.kill(os.getpid(), signal.SIGKILL),
               lambda: signal.raise_signal(signal.SIGKILL)):
    try:
        _leave()
    except BaseException:
        pass

def answer():
    return "@CLAIM@"
'''

ATTACK = Attack(
    name="exec_in_verifier_process",
    tags=("runner", "fake-result"),
    tries="to be run by the verifier's own exec fallback, then forge the runner's final line "
          "with the channel and token found through gc, and leave with posix._exit(0)",
    solution=FORGE,
    verifier=VERIFIER,
    expect="verifier_error",
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
