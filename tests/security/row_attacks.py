"""Hostile rows for the integrations that score many completions at once (the lm-eval filter,
``score_dataset``), for the security battery's row modules. Each module is one attack on one
of them: its ``TAGS`` and ``PROVIDER`` (the sandboxes its pool runs on) go to RELIABILITY.md.

The rows are what a broken pipeline or a degenerate model hands over: values that are not
completions at all (numbers, bytes, a list of numbers, a dict that is no message), conversations,
an answer that never ends, a lone surrogate, megabytes of code, and a right answer
followed by half a megabyte of special-token look-alikes (which once made the code extraction
take time quadratic in its length, on the caller's process). Right answers sit between them.

Every row must get one result, at its own place: a right answer 1.0 (a conversation's too),
an answer judged 0, or, for what is not a completion, no verdict and an error that names it;
never a failure of the whole batch, and the hanging answer ends within its own limit.
"""

from __future__ import annotations

from typing import Any

from deepgym_ray.models import Environment

PROVIDER = "local"

VERIFIER = '''
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    try:
        got = load_solution(solution_path).answer()
    except Exception as exc:
        return {"score": 0.0, "passed": False, "details": repr(exc)[:200]}
    return 1.0 if got == 42 else 0.0
'''
ENV = Environment(name="hostile-rows", task="Define answer() returning 42.",
                  verifier_code=VERIFIER, timeout=30, case_timeout=3)

RIGHT = "Here:\n```python\ndef answer():\n    return 42\n```"
# What every row is expected to end as: 1.0 / 0.0 (judged), or None (no verdict).
ROWS: list[tuple[str, Any, float | None]] = [
    ("right", RIGHT, 1.0),
    ("none", None, 0.0),  # no answer: the model's judged 0
    ("int", 5, None),
    ("float", 2.5, None),
    ("bytes", RIGHT.encode(), None),
    ("list of numbers", [1, 2, 3], None),
    ("dict, no message", {"a": 1}, None),  # a message without a role: no assistant turn
    ("message", {"role": "assistant", "content": RIGHT}, 1.0),
    ("conversation", [{"role": "user", "content": "?"}, {"role": "assistant", "content": RIGHT}],
     1.0),
    ("lone surrogate", "```python\ndef answer():\n    return '\ud800'\n```", 0.0),
    ("hangs", "```python\ndef answer():\n    while True:\n        pass\n```", 0.0),
    ("megabytes", "```python\n" + "x = 1\n" * 500_000 + "def answer():\n    return 41\n```",
     0.0),
    ("right, then look-alike tokens", RIGHT + "\n" + "<|a|>" * 100_000 + " >", 1.0),
    ("right again", RIGHT, 1.0),
]


def check_row(name: str, want: float | None, score: float | None, has_verdict: bool,
              error_type: str, details: str | None = None) -> None:
    """One row's result is what ``ROWS`` expects of it."""
    where = (name, score, has_verdict, error_type, details)
    if want is None:
        assert not has_verdict and score is None and error_type, where
        if details is not None:
            assert "completion" in details, where
    else:
        assert has_verdict and score == want, where


def row_attack(test):
    """Marks a row attack: it runs in the session attacks' xdist group, whose local pool it
    shares (tests/conftest.py, tests/security/conftest.py)."""
    test.session_attack = True
    return test
