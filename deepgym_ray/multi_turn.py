"""What makes an environment multi-turn: the agent's starting files and the episode's settings.

A multi-turn environment's folder says ``"type": "multi-turn"`` in its ``metadata.json``. Its
other files (beyond ``task.md``, ``verifier.py``, ``metadata.json``, ``test_cases.json``,
``setup.sh`` and ``step_verifier.py``) are written into the agent's work directory; ``setup.sh``,
when there is one, runs there first (as the agent's user, before the agent's first action);
``verifier.py`` judges the work directory at the end (``verify(work_dir)``: it is given the
directory where a single-answer verifier gets the solution's file); ``step_verifier.py``, when
there is one, judges it after every step the same way, and its score is that step's reward.
``tools`` names the programs the task needs on the agent's ``PATH`` (``git``, ``pytest``, ...):
the session checks them when it starts, so a sandbox image without one is an outage of ours (no
verdict, naming the program) rather than the agent's 0, and the first observation lists them.

Example:
    >>> task = MultiTurnTask(files={"calc.py": b"def add(a, b): return a - b\\n"}, max_steps=8)
    >>> task.allows("bash"), task.timeout_per_step
    (True, 30.0)
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ACTION_TYPES", "MultiTurnTask"]

ACTION_TYPES: tuple[str, ...] = ("code", "bash", "write_file", "done")

# A program's name as a shell looks it up: no path, nothing a shell would expand.
_PROGRAM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")


class MultiTurnTask(BaseModel):
    """The agent's side of a multi-turn environment (see the module docstring)."""

    # The agent's files are bytes: as JSON they go base64.
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    files: dict[str, bytes] = Field(default_factory=dict)
    setup: str | None = None
    step_verifier: str | None = None
    max_steps: int = Field(default=20, ge=1, le=10_000)
    timeout_per_step: float = Field(default=30.0, gt=0, le=3600)
    allowed_actions: tuple[str, ...] = ACTION_TYPES
    tools: tuple[str, ...] = ()

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, bytes]) -> dict[str, bytes]:
        for raw in files:
            path = PurePosixPath(raw)
            if not raw or path.is_absolute() or ".." in path.parts or "\\" in raw \
                    or raw.endswith("/"):
                raise ValueError(f"agent file {raw!r} must be a relative file path without "
                                 "'..' or backslashes")
        return files

    @field_validator("allowed_actions")
    @classmethod
    def _known_actions(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [a for a in actions if a not in ACTION_TYPES]
        if unknown:
            raise ValueError(f"allowed_actions names {', '.join(map(repr, unknown))}; the "
                             f"actions are {', '.join(ACTION_TYPES)}")
        if not actions:
            raise ValueError("allowed_actions is empty: the agent could do nothing")
        return tuple(dict.fromkeys(actions))

    @field_validator("tools")
    @classmethod
    def _program_names(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in tools if not _PROGRAM_NAME.fullmatch(t)]
        if bad:
            raise ValueError(f"tools names {', '.join(map(repr, bad))}: each must be a program's "
                             "name as found on PATH (letters, digits, '_', '.', '+', '-'; no "
                             "'/' or spaces)")
        return tuple(dict.fromkeys(tools))

    def allows(self, action_type: str) -> bool:
        """Whether the agent may take actions of ``action_type`` (``done`` always ends it)."""
        return action_type == "done" or action_type in self.allowed_actions
