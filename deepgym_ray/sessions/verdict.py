"""Judging an agent's work directory: the judge runner, given the directory where a single
answer's run gives the solution's file.

The verifier runs as it does for one answer (the runner's process, its result over the token
channel, the solution's code kept out of it), on a copy of the agent's work directory that the
runner makes before any verifier code runs (``deepgym_workcopy``: regular files and directories
read through descriptors beneath the directory, no link, no entry the agent could make mean
something else to the verifier; a tree over its bounds is the agent's 0). ``verify(work_dir)``
gets the copy, which is also its current directory, so relative paths mean the agent's files;
the verifier's own files are reachable only by the paths the runtime hands it. It calls the
agent's code only through ``load_solution`` / ``run_solution``, which run it as the agent's
user, in the agent's directory. The moment it first opens or lists a path under the work
directory (as it names it, not where a link would lead), or fails on one, dates the answer's
coming into play: a failure before it has no verdict, after it is the agent's 0.

Example:
    provider.put_files(sandbox, session_files(env))    # once, when the session starts
    judge_work_dir(provider, sandbox, env).score       # after the last step
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from deepgym_ray.judge import sandbox_judge_files
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sandboxes.base import CancelSignal, Sandbox, SandboxProvider
from deepgym_ray.scoring.judging import RUN_WALL_FACTOR, interpret, run_runner, verifier_shape

__all__ = ["judge_work_dir", "session_files"]

STEP_VERIFIER = "step_verifier.py"


def session_files(env: Environment) -> dict[str, bytes]:
    """The judge's files and the environment's verifiers, for the runner's side of the
    sandbox (the agent never sees them)."""
    files = sandbox_judge_files()
    files["verifier.py"] = env.verifier_source().encode("utf-8")
    task = env.multi_turn
    if task is not None and task.step_verifier is not None:
        files[STEP_VERIFIER] = task.step_verifier.encode("utf-8")
    if env.test_cases is not None:
        files["test_cases.json"] = json.dumps(env.test_cases).encode("utf-8")
    return files


def judge_work_dir(provider: SandboxProvider, sandbox: Sandbox, env: Environment, *,
                   step: bool = False, acted: bool = True,
                   cancel: CancelSignal | None = None) -> RunResult:
    """The verifier's (``step``: the step verifier's) judgement of the agent's work directory
    in ``sandbox``. Raises as :func:`~deepgym_ray.scoring.judging.interpret` does when nothing
    was judged (``VerifierError`` says whether the verifier had read the directory).
    ``acted``: whether the agent has acted; a work directory that cannot be copied is then its
    judged 0, before that the environment's error (no verdict)."""
    source = env.multi_turn.step_verifier if step and env.multi_turn else env.verifier_source()
    token = secrets.token_hex(16)
    launch = provider.solution_launch(sandbox)
    config: dict[str, Any] = {
        "token": token,
        "verifier": STEP_VERIFIER if step else "verifier.py",
        "solution": launch["solution_dir"],
        "test_cases": "test_cases.json" if env.test_cases is not None else None,
        "timeout": env.timeout,
        "wall_timeout": RUN_WALL_FACTOR * env.timeout,
        "case_timeout": env.case_timeout,
        "shape": verifier_shape(source or ""),
        **launch,
        "work_copy": {"from": launch["solution_dir"], "acted": acted},
    }
    stdin = (json.dumps(config) + "\n").encode("utf-8")
    outcome = run_runner(provider, sandbox, env, stdin, cancel)  # RunCancelledError if given up
    result = interpret(outcome, token, sandbox_id=sandbox.id)
    return result.model_copy(update={"env_name": env.name, "sandbox_id": sandbox.id})
