"""Repository tasks: a patch to a real code base, graded by hidden tests in the task's image.

A :class:`PatchTask` holds what a SWE-bench row holds (the column names are SWE-bench's, so a
row of its datasets validates as it is); an :class:`ImageRecipe` is a Dockerfile and the files
beside it, named by a hash of their content so the same task never builds twice. An
``Environment`` with a ``patch_task`` is judged by running the task's tests, not a verifier.

Example:
    >>> task = PatchTask.model_validate({
    ...     "instance_id": "demo-1", "test_patch": "diff --git a/t.py b/t.py\\n",
    ...     "FAIL_TO_PASS": '["t.py::test_new"]', "PASS_TO_PASS": "[]"})
    >>> task.fail_to_pass
    ['t.py::test_new']
    >>> ImageRecipe(dockerfile="FROM scratch\\n").tag.startswith("deepgym-task:")
    True
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ImageRecipe", "PatchTask", "TerminalTask"]

# SWE-bench's own test command for pytest repositories, with the interpreter isolated: no
# PYTHONPATH, no user site, no current directory on sys.path before pytest adds the rootdir.
DEFAULT_TEST_COMMAND = "python3 -I -m pytest --no-header -rA --tb=no -p no:cacheprovider"


class ImageRecipe(BaseModel):
    """A Dockerfile and its build context (relative path -> content), built on the node that
    needs it under a tag made from their content (:attr:`tag`)."""

    # Context files are bytes: as JSON (an environment's key, a result file) they go base64.
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    dockerfile: str = Field(min_length=1)
    context: dict[str, bytes] = Field(default_factory=dict)
    build_args: dict[str, str] = Field(default_factory=dict)

    @field_validator("context")
    @classmethod
    def _relative_paths(cls, files: dict[str, bytes]) -> dict[str, bytes]:
        for raw in files:
            path = PurePosixPath(raw)
            if not raw or path.is_absolute() or ".." in path.parts or "\\" in raw:
                raise ValueError(f"build context file {raw!r} must be a relative path "
                                 "without '..'")
            if raw == "Dockerfile":
                raise ValueError("the build context holds the Dockerfile itself: give it as "
                                 "`dockerfile`")
        return files

    @classmethod
    def from_folder(cls, folder: str | Path, **build_args: str) -> ImageRecipe:
        """The recipe of a folder holding a ``Dockerfile`` and its context (``__pycache__``
        and ``.pyc`` files left out)."""
        root = Path(folder)
        dockerfile = root / "Dockerfile"
        if not dockerfile.is_file():
            raise ValueError(f"{root} has no Dockerfile")
        context = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and path != dockerfile and path.suffix != ".pyc"
            and "__pycache__" not in path.parts
        }
        return cls(dockerfile=dockerfile.read_text(encoding="utf-8"), context=context,
                   build_args=build_args)

    @property
    def digest(self) -> str:
        """SHA-256 of the Dockerfile, the build arguments and every context file."""
        h = hashlib.sha256()
        for label, data in [("Dockerfile", self.dockerfile.encode()),
                            *sorted((f"arg:{k}", v.encode()) for k, v in self.build_args.items()),
                            *sorted((f"file:{k}", v) for k, v in self.context.items())]:
            h.update(f"{label}\0{len(data)}\0".encode())
            h.update(data)
        return h.hexdigest()

    @property
    def tag(self) -> str:
        """The image's local tag: the same content, the same tag, on every node."""
        return f"deepgym-task:{self.digest[:24]}"


def _string_list(value: Any, column: str, items: str = "test ids") -> list[str]:
    """A list column: a JSON-encoded string (the SWE-bench datasets' form) or a list."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError(f"{column} must be a JSON list of {items}, got {value[:80]!r}") \
                from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise ValueError(f"{column} must be a list of non-empty {items}")
    return value


# A pytest plugin as `-p` takes it: an entry point's name or a module's dotted name.
_PLUGIN_NAME = re.compile(r"[A-Za-z_][\w.-]*")


_DIFF_PATH = re.compile(r"^diff --git a/(.+?) b/(.+)$|^\+\+\+ b/(.+)$|^--- a/(.+)$", re.M)


class PatchTask(BaseModel):
    """One SWE-style task. Columns by SWE-bench's names (``FAIL_TO_PASS``, ``PASS_TO_PASS``,
    ``test_patch``, ``patch`` for the gold patch); ``test_command`` runs in ``workdir`` with
    the files the test patch touches appended, as SWE-bench's harness does."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    instance_id: str = Field(min_length=1)
    repo: str = ""
    base_commit: str = ""
    test_patch: str = Field(min_length=1)
    fail_to_pass: list[str] = Field(alias="FAIL_TO_PASS", min_length=1)
    pass_to_pass: list[str] = Field(default_factory=list, alias="PASS_TO_PASS")
    gold_patch: str | None = Field(default=None, alias="patch")
    problem_statement: str = ""
    workdir: str = "/testbed"
    test_command: str = DEFAULT_TEST_COMMAND
    test_user: str = "65534:65534"
    partial_credit: bool = False
    #: The name of the swebench package's log parser for this repository's test runner
    #: (``parse_log_pytest``, ``parse_log_django``, ``parse_log_sympy``, ...).
    log_parser: str = Field(default="parse_log_pytest", pattern=r"^parse_log_[a-z0-9_]+$")
    #: The pytest plugins the tests need from the image (entry point or module names, given to
    #: pytest as ``-p NAME``): the tests run with plugin autoloading off, so that no entry point
    #: loads itself into them unnamed. A JSON list, like the test lists, or a list.
    pytest_plugins: list[str] = Field(default_factory=list)

    @field_validator("fail_to_pass", "pass_to_pass", mode="before")
    @classmethod
    def _lists(cls, value: Any, info: Any) -> list[str]:
        column = {"fail_to_pass": "FAIL_TO_PASS", "pass_to_pass": "PASS_TO_PASS"}[
            info.field_name]
        return _string_list(value, column)

    @field_validator("pytest_plugins", mode="before")
    @classmethod
    def _plugins(cls, value: Any) -> list[str]:
        names = _string_list(value, "pytest_plugins", "plugin names")
        bad = [name for name in names if not _PLUGIN_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"pytest_plugins: {bad[0]!r} is not an entry point or module name")
        return names

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ".." in PurePosixPath(value).parts:
            raise ValueError(f"workdir {value!r} must be an absolute path without '..'")
        return value

    @property
    def test_files(self) -> list[str]:
        """The files the test patch touches, in the order it names them."""
        return patched_paths(self.test_patch)


def patched_paths(diff: str) -> list[str]:
    """Every path a unified diff names (old and new), in order, once each; ``/dev/null`` left
    out."""
    seen: dict[str, None] = {}
    for match in _DIFF_PATH.finditer(diff):
        for path in match.groups():
            if path and path != "/dev/null":
                seen.setdefault(path.strip().strip('"'), None)
    return list(seen)


class TerminalTask(BaseModel):
    """One Terminal-Bench task in Harbor's format: the agent's answer is a shell script run in
    the task's container; the task's tests (``tests/test.sh`` and the files beside it) then run
    in a fresh container of the same image holding only the agent's work directory, and write
    the reward to ``/logs/verifier/reward.json`` or ``reward.txt``."""

    # Test files are bytes: as JSON they go base64.
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    instruction: str = ""
    tests: dict[str, bytes]
    solution: str | None = None
    agent_timeout: float = Field(default=600.0, gt=0)
    verifier_timeout: float = Field(default=600.0, gt=0)
    workdir: str = "/app"
    agent_user: str = "0"
    memory_mb: int = Field(default=2048, gt=0)
    cpus: float = Field(default=1.0, gt=0)
    storage_mb: int = Field(default=2048, gt=0)

    @field_validator("tests")
    @classmethod
    def _has_test_sh(cls, tests: dict[str, bytes]) -> dict[str, bytes]:
        for raw in tests:
            path = PurePosixPath(raw)
            if not raw or path.is_absolute() or ".." in path.parts:
                raise ValueError(f"test file {raw!r} must be a relative path without '..'")
        if "test.sh" not in tests:
            raise ValueError("a Harbor task's tests need test.sh")
        return tests

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ".." in PurePosixPath(value).parts or value == "/":
            raise ValueError(f"workdir {value!r} must be an absolute path without '..', "
                             "not /")
        return value.rstrip("/")
