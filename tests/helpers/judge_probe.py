"""Shared helpers for the judge tests: a probe environment and host-state checks."""

from __future__ import annotations

import json
import os
import uuid

from deepgym_ray.models import Environment

SECRET = "SECRET-" + uuid.uuid4().hex

# A verifier that gives 1.0 only to a solution that found the secret, which lives in the
# verifier, its test cases, a support file and the verifier's environment variables: a score
# of 1.0 means an attack on the judge worked.
PROBE_VERIFIER = f'''
from deepgym_solution import load_solution

SECRET = "{SECRET}"


def verify(solution_path, test_cases_path=None):
    try:
        sol = load_solution(solution_path)
        got = sol.answer()
    except Exception as exc:
        return {{"score": 0.0, "passed": False, "details": repr(exc)[:500]}}
    return {{"score": 1.0 if got == SECRET else 0.0, "passed": got == SECRET,
             "details": repr(got)[:500]}}
'''


def probe_env(**overrides) -> Environment:
    fields = dict(name="probe", verifier_code=PROBE_VERIFIER, test_cases=[{"secret": SECRET}],
                  support_files={"data/secret.txt": SECRET}, env_vars={"DG_SECRET": SECRET},
                  timeout=20, case_timeout=4)
    fields.update(overrides)
    return Environment(**fields)


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line mentions ``marker`` (this process excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


# A solution that rewrites its own worker (found through gc) so that every reply carries a
# write-back (``mut``) of its choosing, whether or not the request asked for one.
_FORGER = '''
import gc
def _forge():
    for space in gc.get_objects():
        if type(space) is dict and "_answer" in space and "OBJECTS" in space:
            real = space["_answer"]
            def forged(call, _real=real):
                reply = _real(call)
                if reply.get("ok") and "args" in call:
                    reply["mut"] = MUT
                return reply
            space["_answer"] = forged
_forge()
'''


def write_back_forger(changes: list) -> str:
    """The start of a solution whose every reply forges ``changes`` (the wire's change list:
    ``[[argument index, wire tree], ...]``) as the write-back to the verifier's arguments."""
    return _FORGER.replace("MUT", repr(json.dumps(changes)))
