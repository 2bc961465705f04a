"""Verifiers in the three shapes built from one body, and the contract's expected results.

A fault is written once as a function body that uses ``solution_path`` and leaves its result
in ``result``; :func:`verifier_code` turns it into a module with ``verify()``, a script that
prints its JSON result, or a bare body ending in ``return``.
"""

from __future__ import annotations

import textwrap

import pytest

from deepgym_ray.models import Environment, RunResult

SHAPES = ("module", "script", "body")
GOOD = "def f():\n    return 1\n"
WRONG = "def f():\n    return 2\n"

# The body's opening that brings the answer into play (a solution process starts).
IN_PLAY = "from deepgym_solution import load_solution\nok = load_solution(solution_path).f() == 1\n"
NOT_IN_PLAY = "ok = True\n"


def verifier_code(shape: str, body: str, result: str = "result") -> str:
    """``body`` (statements setting ``result``) as a verifier of ``shape``."""
    body = textwrap.dedent(body).strip("\n") + "\n"
    if shape == "module":
        inner = textwrap.indent(body + f"return {result}\n", "    ")
        return "def verify(solution_path, test_cases_path=None):\n" + inner
    if shape == "body":
        return body + f"return {result}\n"
    if shape == "script":
        return ("import json as _json, sys as _sys\nsolution_path = _sys.argv[1]\n" + body
                + f"print(_json.dumps({result}))\n")
    raise ValueError(shape)


def env_for(shape: str, body: str, *, result: str = "result", timeout: float = 20,
            case_timeout: float = 5, **fields) -> Environment:
    return Environment(name=f"vf-{shape}", verifier_code=verifier_code(shape, body, result),
                       timeout=timeout, case_timeout=case_timeout, **fields)


def expect(result: RunResult, *, score: float, passed: bool, has_verdict: bool,
           error_type: str | None) -> None:
    """Assert exactly the contract's result (details shown on failure)."""
    got = (result.score, result.passed, result.has_verdict, result.error_type)
    assert got == (score, passed, has_verdict, error_type), result.details


def judged(client, env: Environment, code: str = GOOD) -> RunResult:
    """What a batch records for one run (a raise becomes a result without a verdict)."""
    return client.run_safe(env, code)


def raises(client, env: Environment, exc_type: type[BaseException], code: str = GOOD):
    """``run`` raises ``exc_type``; returns the exception for further checks."""
    with pytest.raises(exc_type) as info:
        client.run(env, code)
    return info.value
