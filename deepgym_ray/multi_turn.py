"""What makes an environment multi-turn: the agent's starting files and the episode's settings.

A multi-turn environment's folder says ``"type": "multi-turn"`` in its ``metadata.json``. Its
other files (beyond ``task.md``, ``verifier.py``, ``metadata.json``, ``test_cases.json``,
``setup.sh`` and ``step_verifier.py``) are written into the agent's work directory; ``setup.sh``,
when there is one, runs there first (as the agent's user, before the agent's first action);
``verifier.py`` judges the work directory at the end (``verify(work_dir)``: it is given the
directory where a single-answer verifier gets the solution's file); ``step_verifier.py``, when
there is one, judges it after every step the same way, and its score is that step's reward.

Example:
    >>> task = MultiTurnTask(files={"calc.py": b"def add(a, b): return a - b\\n"}, max_steps=8)
    >>> task.allows("bash"), task.timeout_per_step
    (True, 30.0)
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ACTION_TYPES", "MultiTurnTask"]

ACTION_TYPES: tuple[str, ...] = ("code", "bash", "write_file", "done")


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

    def allows(self, action_type: str) -> bool:
        """Whether the agent may take actions of ``action_type`` (``done`` always ends it)."""
        return action_type == "done" or action_type in self.allowed_actions
