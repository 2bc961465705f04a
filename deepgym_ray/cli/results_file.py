"""The ``--out`` file of ``deepgym-ray eval``: one JSON line per result, resumable.

Each result is written and flushed as soon as it is known, so a killed eval loses nothing it
had finished. Opening the file again reads what is there: a result's key is its task id and
sample number, so a rerun skips those. A last line cut short by a kill is dropped (and rewritten
by the rerun); any other malformed line is an error naming it.

Each line: ``task_id`` (exactly as the solutions file gave it, ``HumanEval/0``), ``sample``,
``env_name``, ``completion`` (the answer as given), ``answer_sha`` (a fingerprint of the answer,
so a rerun with different answers is refused instead of mixing them), ``has_verdict``, and the
RunResult's fields (``score``, ``passed``, ``error_type``, ``details``, ...). A UTF-8 BOM at
the start of the file is skipped.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
    >>> with ResultsFile(path) as out:
    ...     out.append({"task_id": "a", "sample": 0, "answer_sha": "x", "score": 1.0})
    >>> sorted(ResultsFile(path).read())
    [('a', 0)]
"""

from __future__ import annotations

import codecs
import json
import logging
import os
from pathlib import Path
from typing import Any

from deepgym_ray.models import RunResult

__all__ = ["ResultsFile", "ResultsFileError", "record_for", "result_from_record"]

logger = logging.getLogger(__name__)

Key = tuple[str, int]


class ResultsFileError(ValueError):
    """The ``--out`` file cannot be used: a malformed line, answers that differ, a lock held."""


def record_for(task_id: str, sample: int, answer_sha: str, result: RunResult,
               completion: Any = None) -> dict[str, Any]:
    """The JSON line written for one result (``completion``: the answer as it was given)."""
    record: dict[str, Any] = {"task_id": task_id, "sample": sample, "answer_sha": answer_sha}
    if completion is not None:
        record["completion"] = completion
    record.update(result.model_dump(mode="json"))
    record["env_name"] = result.env_name or task_id
    return record


def result_from_record(record: dict[str, Any]) -> RunResult:
    """The RunResult a line holds (the bookkeeping keys and computed fields left out)."""
    fields = {k: v for k, v in record.items() if k in RunResult.model_fields}
    return RunResult.model_validate(fields)


def _key(record: Any) -> Key | None:
    if not isinstance(record, dict):
        return None
    task_id, sample = record.get("task_id"), record.get("sample")
    if not isinstance(task_id, str) or type(sample) is not int:
        return None
    return task_id, sample


class ResultsFile:
    """Append-only results with resume. Use as a context manager to write."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._handle: Any = None

    def read(self) -> dict[Key, dict[str, Any]]:
        """The results already in the file, by key; repairs a last line cut short by a kill."""
        self.check_usable()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ResultsFileError(f"cannot read results file {self.path}: "
                                   f"{exc.strerror or exc}") from None
        # A UTF-8 BOM (an editor's) before the first line is not part of it.
        bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        records: dict[Key, dict[str, Any]] = {}
        lines = data[bom:].split(b"\n")
        good_end = offset = bom  # byte offset just past the last complete, valid line
        for number, raw in enumerate(lines, start=1):
            is_last = number == len(lines)
            end = offset + len(raw) + (0 if is_last else 1)
            if raw.strip():
                record = self._parse(raw)
                key = _key(record)
                if key is None or not self._complete(record):
                    if is_last:  # cut short by a kill: drop it, the rerun writes it again
                        logger.warning("%s: dropping an incomplete last line", self.path)
                        self._truncate(good_end)
                        break
                    raise ResultsFileError(
                        f"results file {self.path} line {number} is not a deepgym-ray result; "
                        "use another --out file"
                    )
                if key in records:
                    logger.warning("%s line %d: %s sample %d appears twice; keeping the first",
                                   self.path, number, *key)
                else:
                    records[key] = record
                if is_last:  # complete, only its newline was lost
                    self._append_newline()
            good_end = end
            offset = end
        return records

    @staticmethod
    def _parse(raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None

    @staticmethod
    def _complete(record: dict[str, Any]) -> bool:
        try:
            result_from_record(record)
        except ValueError:
            return False
        return isinstance(record.get("answer_sha"), str)

    def _truncate(self, size: int) -> None:
        with self.path.open("r+b") as handle:
            handle.truncate(size)

    def _append_newline(self) -> None:
        with self.path.open("ab") as handle:
            handle.write(b"\n")

    def check_usable(self) -> None:
        """Raise ResultsFileError when the path cannot be a results file (a directory)."""
        if self.path.is_dir():
            raise ResultsFileError(f"--out {self.path} is a directory; give a file in it, "
                                   f"such as {self.path / 'results.jsonl'}")

    def __enter__(self) -> ResultsFile:
        self.check_usable()
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ResultsFileError(f"cannot write results file {self.path}: "
                                   f"{exc.strerror or exc}") from None
        try:
            import fcntl

            fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not on POSIX: no lock
            pass
        except OSError:
            self._handle.close()
            self._handle = None
            raise ResultsFileError(
                f"results file {self.path} is being written by another eval"
            ) from None
        return self

    def append(self, record: dict[str, Any]) -> None:
        """Write one result line and flush it to the OS, so a kill cannot lose it."""
        line = json.dumps(record, allow_nan=False, default=repr) + "\n"
        self._handle.write(line)
        self._handle.flush()

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            self._handle.flush()
            try:
                os.fsync(self._handle.fileno())
            except OSError:
                pass
            self._handle.close()
            self._handle = None
