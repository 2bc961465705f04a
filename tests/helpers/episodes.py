"""A multi-turn environment for the session tests: the agent's work passes when it leaves
``answer.txt`` holding "42" (one ``echo 42 > answer.txt`` does it)."""

from __future__ import annotations

from deepgym_ray.models import Environment
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.sessions import Action

ANSWER_VERIFIER = '''
import os

def verify(work_dir, test_cases_path=None):
    try:
        with open(os.path.join(work_dir, "answer.txt")) as f:
            ok = f.read().strip() == "42"
    except OSError:
        ok = False
    return {"score": 1.0 if ok else 0.0, "passed": ok}
'''
RIGHT = Action(action_type="bash", content="echo 42 > answer.txt")


def answer_env(verifier: str = ANSWER_VERIFIER, *, name: str = "answer", task: str = "",
               timeout: float = 30, **settings) -> Environment:
    """The environment, with ``settings`` for its MultiTurnTask (``files`` default: a note)."""
    files = settings.pop("files", {"notes.txt": b"write 42 to answer.txt\n"})
    return Environment(name=name, task=task, verifier_code=verifier, timeout=timeout,
                       case_timeout=min(5, timeout),
                       multi_turn=MultiTurnTask(files=files, **settings))
