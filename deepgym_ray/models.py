"""Pydantic models: an Environment to score against, and the results of scoring.

Example:
    >>> env = Environment(name="echo", verifier_code="return 1.0")
    >>> RunResult(score=1.0, passed=True).has_verdict
    True
    >>> RunResult(error_type="sandbox_error").reward is None
    True
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    computed_field,
    field_validator,
    model_validator,
)

from deepgym_ray import contract
from deepgym_ray.contract import MODEL_FAULT_ERRORS
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.repo_tasks import ImageRecipe, PatchTask, TerminalTask
from deepgym_ray.textfiles import read_text

__all__ = [
    "MODEL_FAULT_ERRORS",
    "RESERVED_SANDBOX_NAMES",
    "BatchResult",
    "CaseResult",
    "Environment",
    "EvalResult",
    "RunResult",
]

# Files the judge itself places in every sandbox; a support file may not replace them.
RESERVED_SANDBOX_NAMES = frozenset({"verifier.py", "solution.py", "test_cases.json"})
RESERVED_SANDBOX_PREFIX = "deepgym_"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")
_ENV_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Environment(BaseModel):
    """A task and the verifier that judges answers to it.

    ``timeout`` bounds the whole run in seconds; ``case_timeout`` bounds one call into the
    solution. ``support_files`` maps relative paths to file contents placed next to the verifier.
    ``multi_turn`` makes it an agent's episode (see :mod:`deepgym_ray.multi_turn`): ``timeout``
    then bounds the verifier's judging of the work directory.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    task: str = ""
    verifier_code: str | None = None
    verifier_path: Path | None = None
    reference_solution: str | None = None
    support_files: dict[str, str] = Field(default_factory=dict)
    test_cases: list[Any] | None = None
    timeout: float = Field(default=60.0, gt=0, le=24 * 3600)
    case_timeout: float = Field(default=10.0, gt=0)
    image: str | None = None
    image_recipe: ImageRecipe | None = None
    patch_task: PatchTask | None = None
    terminal_task: TerminalTask | None = None
    multi_turn: MultiTurnTask | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    difficulty: str | None = None
    domain: str | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _NAME_RE.match(name) or ".." in name:
            raise ValueError(
                f"environment name {name!r} must start with a letter or digit and use only "
                "letters, digits, '_', '-', '.' and '/'"
            )
        return name

    @field_validator("support_files")
    @classmethod
    def _check_support_files(cls, files: dict[str, str]) -> dict[str, str]:
        for raw in files:
            path = PurePosixPath(raw)
            if not raw or raw.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", raw):
                raise ValueError(f"support file {raw!r} must be a relative path")
            if ".." in path.parts or "\\" in raw:
                raise ValueError(f"support file {raw!r} may not contain '..' or backslashes")
            top = path.parts[0]
            if top in RESERVED_SANDBOX_NAMES or top.startswith(RESERVED_SANDBOX_PREFIX):
                raise ValueError(
                    f"support file {raw!r} would replace the judge's own file {top!r}"
                )
        return files

    @field_validator("test_cases")
    @classmethod
    def _check_test_cases(cls, cases: list[Any] | None) -> list[Any] | None:
        if cases is not None:
            try:
                json.dumps(cases, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"test_cases must be plain JSON data: {exc}") from None
        return cases

    @field_validator("env_vars")
    @classmethod
    def _check_env_vars(cls, env_vars: dict[str, str]) -> dict[str, str]:
        for key in env_vars:
            if not _ENV_VAR_RE.match(key):
                raise ValueError(f"env_vars key {key!r} is not a valid variable name")
        return env_vars

    @model_validator(mode="after")
    def _check_verifier_and_timeouts(self) -> Environment:
        if self.multi_turn is not None and (self.patch_task or self.terminal_task):
            raise ValueError(f"environment {self.name!r}: a multi-turn environment is not a "
                             "repository task too")
        if self.patch_task is not None or self.terminal_task is not None:
            if self.patch_task is not None and self.terminal_task is not None:
                raise ValueError(f"environment {self.name!r}: give patch_task or "
                                 "terminal_task, not both")
            if self.verifier_code is not None or self.verifier_path is not None:
                raise ValueError(f"environment {self.name!r}: a repository task is judged by "
                                 "its tests; give no verifier")
            if self.image is None and self.image_recipe is None:
                raise ValueError(f"environment {self.name!r}: a repository task needs `image` "
                                 "(its code base) or `image_recipe`")
            return self
        if self.verifier_code is None and self.verifier_path is None:
            raise ValueError(f"environment {self.name!r} needs verifier_code or verifier_path")
        if self.verifier_code is not None and self.verifier_path is not None:
            raise ValueError(
                f"environment {self.name!r}: give verifier_code or verifier_path, not both"
            )
        if self.verifier_code is not None and not self.verifier_code.strip():
            raise ValueError(f"environment {self.name!r}: verifier_code is empty")
        if self.case_timeout > self.timeout:
            raise ValueError(
                f"environment {self.name!r}: case_timeout ({self.case_timeout}s) is longer "
                f"than the whole run's timeout ({self.timeout}s)"
            )
        return self

    @property
    def answer_languages(self) -> tuple[str, ...]:
        """The fence languages an answer is taken from first: a patch task's ``diff`` block,
        a Terminal-Bench task's shell block; none (the last block) otherwise."""
        if self.patch_task is not None:
            return ("diff", "patch")
        if self.terminal_task is not None:
            return ("bash", "sh", "shell")
        return ()

    def verifier_source(self) -> str:
        """The verifier's code, read from ``verifier_path`` when the code was not given inline
        (UTF-8, a byte order mark dropped; ValueError naming the file otherwise)."""
        if self.verifier_code is not None:
            return self.verifier_code
        assert self.verifier_path is not None
        try:
            return read_text(self.verifier_path)  # ValueError naming it when not UTF-8
        except OSError as exc:
            raise ValueError(
                f"environment {self.name!r}: cannot read verifier {self.verifier_path}: {exc}"
            ) from exc


class CaseResult(BaseModel):
    """One test case's outcome, as the verifier reported it. Extra keys are kept."""

    model_config = ConfigDict(extra="allow")

    id: str
    passed: bool = False
    score: float = 0.0

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> str:
        return str(value)


class RunResult(BaseModel):
    """The outcome of scoring one answer.

    A result whose score or reward components can never be reward (NaN, infinite, outside
    [0, 1]) is turned into an ``invalid_score`` result on construction, whatever built it, so
    such a score never reaches a trainer.
    """

    model_config = ConfigDict(extra="forbid")

    score: float = 0.0
    passed: bool = False
    error_type: str | None = None
    exit_code: int | None = None
    details: str | None = None
    reward_components: dict[str, float] | None = None
    cases: list[CaseResult] | None = None
    duration: float = 0.0
    sandbox_id: str | None = None
    env_name: str | None = None

    @field_validator("details", mode="before")
    @classmethod
    def _details_as_text(cls, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        try:
            return json.dumps(value, default=repr)
        except (TypeError, ValueError):
            return repr(value)

    @model_validator(mode="before")
    @classmethod
    def _reject_invalid_scores(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        problem = _score_problem(data)
        if problem is None:
            if "score" in data:
                data["score"] = contract.clamp_score(data["score"])
            return data
        details = data.get("details")
        data.update(
            score=0.0,
            passed=False,
            error_type=contract.INVALID_SCORE,
            reward_components=None,
            cases=None,
            details=problem if not details else f"{problem}; {details}",
        )
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_verdict(self) -> bool:
        """Whether the verifier judged the answer (see :func:`deepgym_ray.contract.is_verdict`)."""
        return contract.is_verdict(self.exit_code, self.error_type)

    @property
    def reward(self) -> float | None:
        """The score a trainer may use, or None when there is no verdict."""
        return self.score if self.has_verdict else None

    @property
    def counts_as_passed(self) -> bool:
        """Passed, by the conservative rule: a run without a verdict never passed."""
        return self.has_verdict and self.passed


def _score_problem(data: dict[str, Any]) -> str | None:
    """Why the score, a reward component or a case score in ``data`` can never be reward."""
    if "score" in data:
        problem = contract.check_score(data["score"])
        if problem:
            return problem
    problem = contract.check_components(data.get("reward_components"))
    if problem:
        return problem
    for case in data.get("cases") or ():
        if isinstance(case, CaseResult):
            case = case.model_dump()
        if isinstance(case, dict) and "score" in case:
            problem = contract.check_score(case["score"])
            if problem:
                return f"case {case.get('id')!r}: {problem}"
    return None


def _ratio(numerator: float, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


class BatchResult(BaseModel):
    """Results of many runs, in input order, with conservative and judged-only totals.

    The headline numbers (``passed``, ``failed``, ``avg_score``, ``pass_rate``) count a run
    without a verdict as a failed 0. The ``judged_*`` numbers leave such runs out.
    """

    model_config = ConfigDict(extra="forbid")

    results: list[RunResult] = Field(default_factory=list)
    duration: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return len(self.results)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.counts_as_passed)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> int:
        return self.total - self.passed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def avg_score(self) -> float:
        return _ratio(sum(r.score for r in self.results if r.has_verdict), self.total)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_rate(self) -> float:
        return _ratio(self.passed, self.total)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def judged(self) -> int:
        return sum(1 for r in self.results if r.has_verdict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def judged_pass_rate(self) -> float:
        return _ratio(self.passed, self.judged)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def judged_avg_score(self) -> float:
        return _ratio(sum(r.score for r in self.results if r.has_verdict), self.judged)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def no_verdict(self) -> int:
        return self.total - self.judged

    @computed_field  # type: ignore[prop-decorator]
    @property
    def no_verdict_rate(self) -> float:
        return _ratio(self.no_verdict, self.total)

    @property
    def rewards(self) -> list[float | None]:
        """Each result's reward: its score, or None where there is no verdict."""
        return [r.reward for r in self.results]


class EvalResult(BatchResult):
    """A suite's results; ``env_names[i]`` names the environment of ``results[i]``."""

    env_names: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_name_per_result(self) -> EvalResult:
        if len(self.env_names) != len(self.results):
            raise ValueError(
                f"env_names has {len(self.env_names)} names for {len(self.results)} results"
            )
        return self

