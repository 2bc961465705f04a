"""The public shapes of an agent episode: what the agent does (:class:`Action`), what it sees
(:class:`Observation`), and the record of both (:class:`Trajectory`).

Example:
    >>> Action(action_type="write_file", path="src/fix.py", content="x = 1\\n").path
    'src/fix.py'
    >>> Action(action_type="write_file", path="../etc/passwd", content="")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Action
    ...
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deepgym_ray.models import RunResult
from deepgym_ray.multi_turn import ACTION_TYPES

__all__ = ["ACTION_TYPES", "Action", "Observation", "Trajectory", "TrajectoryStep"]

ActionType = Literal["code", "bash", "write_file", "done"]
MAX_PATH = 4096


class Action(BaseModel):
    """One move of the agent: run Python ``code``, run a ``bash`` command, write ``content`` to
    ``path`` (``write_file``, relative to the work directory), or say it is ``done``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action_type: ActionType
    content: str = ""
    path: str | None = None

    @field_validator("path")
    @classmethod
    def _relative_path(cls, raw: str | None) -> str | None:
        if raw is None:
            return None
        if not raw or len(raw) > MAX_PATH or "\x00" in raw:
            raise ValueError("path must be a non-empty relative path without NUL bytes "
                             f"(at most {MAX_PATH} characters)")
        if raw.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", raw):
            raise ValueError(f"path {raw!r} must be relative to the work directory")
        parts = PurePosixPath(raw).parts
        if ".." in parts or "\\" in raw:
            raise ValueError(f"path {raw!r} may not contain '..' or backslashes")
        if raw.endswith("/") or parts in ((), (".",)):
            raise ValueError(f"path {raw!r} names a directory, not a file")
        return str(PurePosixPath(raw))

    @model_validator(mode="after")
    def _path_only_for_files(self) -> Action:
        if self.action_type == "write_file" and self.path is None:
            raise ValueError("a write_file action needs a path")
        if self.action_type != "write_file" and self.path is not None:
            raise ValueError(f"a {self.action_type} action takes no path")
        return self


class Observation(BaseModel):
    """What the agent sees after a step (or at the start, step 0): the output of its action,
    or the task and the files it was given; ``done`` once the episode is over."""

    model_config = ConfigDict(extra="forbid")

    content: str
    step: int = Field(ge=0)
    done: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class TrajectoryStep(BaseModel):
    """One step of an episode: the action, what came of it, and the step verifier's reward
    (None where the environment has no step verifier)."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    observation: Observation
    reward: float | None = None


class Trajectory(BaseModel):
    """An episode: its first observation, its steps in order, and the final result once
    scored (None before)."""

    model_config = ConfigDict(extra="forbid")

    env_name: str | None = None
    start: Observation | None = None
    steps: list[TrajectoryStep] = Field(default_factory=list)
    result: RunResult | None = None

    @property
    def rewards(self) -> list[float | None]:
        """The step rewards, in order."""
        return [step.reward for step in self.steps]
