"""Environment folders: read one, list the built-in ones (names: ``deepgym_ray.suites.resolver``).

A folder holds ``task.md``, ``verifier.py``, ``reference_solution.py`` and ``metadata.json``
(name, difficulty, domain, tags, timeout, case_timeout), optionally ``test_cases.json`` and
support files (any other file next to the verifier). A folder whose metadata says
``"type": "multi-turn"`` is an agent's episode (:mod:`deepgym_ray.multi_turn`): its other files
are the agent's, and its reference is ``reference_actions.json``, a list of actions; the
built-in ones live in ``multi_turn/`` (``multi_turn_names``), apart from the single-answer
ones. The verifier's code is read into the Environment so it travels to other nodes with it.
Those five files must be UTF-8 (a leading byte order mark is dropped); one that is not raises
ValueError naming it and the bad byte.
An environment is named after its folder: metadata.json's ``name`` is informative only, and
one that differs is logged as a warning (routing and results use the folder's name).

Example:
    >>> load_folder(BUILTIN_DIR / "coin_change").name
    'coin_change'
    >>> "coin_change" in [e["name"] for e in list_environments()]
    True
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deepgym_ray.models import RESERVED_SANDBOX_NAMES, RESERVED_SANDBOX_PREFIX, Environment
from deepgym_ray.multi_turn import MultiTurnTask
from deepgym_ray.textfiles import read_text

logger = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).resolve().parent
MULTI_TURN_DIR = BUILTIN_DIR / "multi_turn"  # the built-in multi-turn ones: not in "builtin"
_FOLDER_FILES = {"task.md", "verifier.py", "reference_solution.py", "metadata.json",
                 "test_cases.json"}
# A multi-turn folder's own files beyond those (see deepgym_ray.multi_turn); the rest are the
# agent's. Its reference is a list of actions.
_MULTI_TURN_FILES = {"setup.sh", "step_verifier.py", "reference_actions.json"}
_SKIP = {"__pycache__", ".DS_Store"}
_MAX_SUPPORT_BYTES = 8 << 20


def builtin_names() -> list[str]:
    """Names of the built-in environments (folders with a verifier.py)."""
    return sorted(p.name for p in BUILTIN_DIR.iterdir()
                  if p.is_dir() and (p / "verifier.py").is_file())


def _read_json(path: Path) -> Any:
    text = read_text(path)  # a ValueError naming the file when it is not UTF-8
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc


def _other_files(folder: Path, own: set[str], what: str) -> Iterator[tuple[str, Path]]:
    """``(relative path, path)`` of every file in ``folder`` but the folder's ``own`` files
    (at its top) and what is skipped; ValueError for one larger than the limit."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(part in _SKIP for part in rel.parts):
            continue
        if len(rel.parts) == 1 and rel.name in own:
            continue
        if path.stat().st_size > _MAX_SUPPORT_BYTES:
            raise ValueError(f"{what} {path} is larger than {_MAX_SUPPORT_BYTES} bytes")
        yield rel.as_posix(), path


def _support_files(folder: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for rel, path in _other_files(folder, _FOLDER_FILES, "support file"):
        top = rel.split("/")[0]
        if top in RESERVED_SANDBOX_NAMES or top.startswith(RESERVED_SANDBOX_PREFIX):
            continue
        try:
            files[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"support file {path} is not UTF-8 text") from exc
    return files


def _agent_files(folder: Path) -> dict[str, bytes]:
    """A multi-turn folder's files for the agent's work directory (all but its own)."""
    return {rel: path.read_bytes() for rel, path in
            _other_files(folder, _FOLDER_FILES | _MULTI_TURN_FILES, "agent file")}


def _multi_turn(folder: Path, meta: dict[str, Any]) -> MultiTurnTask:
    setup, step = folder / "setup.sh", folder / "step_verifier.py"
    settings = {key: meta[key] for key in ("max_steps", "timeout_per_step", "allowed_actions",
                                           "tools") if meta.get(key) is not None}
    return MultiTurnTask(files=_agent_files(folder),
                         setup=read_text(setup) if setup.is_file() else None,
                         step_verifier=read_text(step) if step.is_file() else None, **settings)


def load_folder(folder: str | Path, name: str | None = None) -> Environment:
    """An Environment from a folder in the format above."""
    folder = Path(folder)
    verifier = folder / "verifier.py"
    if not verifier.is_file():
        raise ValueError(f"{folder} is not an environment folder: it has no verifier.py")
    meta = _read_json(folder / "metadata.json") if (folder / "metadata.json").is_file() else {}
    if not isinstance(meta, dict):
        raise ValueError(f"{folder / 'metadata.json'} must hold a JSON object")
    if meta.get("type", "single-turn") not in ("single-turn", "multi-turn"):
        raise ValueError(f"{folder / 'metadata.json'}: type must be 'single-turn' or "
                         f"'multi-turn', not {meta['type']!r}")
    task = folder / "task.md"
    reference = folder / "reference_solution.py"
    tests = folder / "test_cases.json"
    name = name or folder.resolve().name
    if meta.get("name") is not None and meta["name"] != name:
        # Rows, solutions files and results name an environment by its folder, so a second
        # name would route nothing: say which one counts rather than drop it silently.
        logger.warning("%s: metadata.json names it %r; the environment is named %r after its "
                       "folder (routing and results use that name)",
                       folder, meta["name"], name)
    multi_turn = meta.get("type") == "multi-turn"
    if multi_turn:
        reference = folder / "reference_actions.json"
    fields: dict[str, Any] = {
        "name": name,
        "task": read_text(task) if task.is_file() else "",
        "verifier_code": read_text(verifier),
        "reference_solution": read_text(reference) if reference.is_file() else None,
        "support_files": {} if multi_turn else _support_files(folder),
        "test_cases": _read_json(tests) if tests.is_file() else None,
    }
    for key in ("timeout", "case_timeout", "difficulty", "domain", "tags", "image", "env_vars"):
        if meta.get(key) is not None:
            fields[key] = meta[key]
    try:
        if multi_turn:
            fields["multi_turn"] = _multi_turn(folder, meta)
        return Environment(**fields)
    except ValueError as exc:
        raise ValueError(f"environment folder {folder} is invalid: {exc}") from exc


def multi_turn_names() -> list[str]:
    """Names of the built-in multi-turn environments (agent episodes; see ``DeepGym.session``)."""
    return sorted(p.name for p in MULTI_TURN_DIR.iterdir()
                  if p.is_dir() and (p / "verifier.py").is_file())


def list_environments(multi_turn: bool = False) -> list[dict[str, Any]]:
    """Name, difficulty, domain and tags of every built-in environment (``multi_turn``: of
    the built-in multi-turn ones, for agent episodes)."""
    out = []
    root = MULTI_TURN_DIR if multi_turn else BUILTIN_DIR
    for name in multi_turn_names() if multi_turn else builtin_names():
        meta_path = root / name / "metadata.json"
        meta = _read_json(meta_path) if meta_path.is_file() else {}
        out.append({"name": name, "difficulty": meta.get("difficulty"),
                    "domain": meta.get("domain"), "tags": list(meta.get("tags") or [])})
    return out


def is_environment_folder(folder: str | Path) -> bool:
    """True when ``folder`` is one environment (it holds a verifier.py)."""
    return (Path(folder) / "verifier.py").is_file()


def load_folder_suite(folder: str | Path) -> list[Environment]:
    """Every environment folder directly inside ``folder`` (a suite of your own), by name.

    Each member is named after its folder; a folder that is not an environment (no
    verifier.py) is left out, and a folder holding none at all is an error.
    """
    folder = Path(folder).expanduser()
    members = sorted((p for p in folder.iterdir() if p.is_dir() and p.name not in _SKIP
                      and is_environment_folder(p)), key=lambda p: p.name)
    if not members:
        raise ValueError(f"{folder} is neither an environment folder (no verifier.py) nor a "
                         "folder of environment folders")
    return [load_folder(member) for member in members]
