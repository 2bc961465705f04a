"""SWE-style patch tasks from a local file of SWE-bench rows (JSONL or Parquet).

Each row becomes one environment named ``SUITE/<instance_id>`` whose answer is a unified diff
(see :mod:`deepgym_ray.scoring.patch_judging`). The columns are SWE-bench's (``instance_id``,
``repo``, ``base_commit``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ...).
A row's image is, in order: its ``image_name`` or ``dockerhub_tag`` column (SWE-bench Pro's
rows carry one; used as it is, from the engine or a registry the cluster reaches),
``image_template`` formatted with the row's columns, or ``recipe``, an image built from a
Dockerfile on each node that needs it. Nothing is downloaded.

Example:
    envs = load_swebench("tests/fixtures/swe/tasks.jsonl",
                         recipe=ImageRecipe.from_folder("tests/fixtures/swe"))
    envs[0].name   # 'swebench/deepgym__minicalc-1'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe, PatchTask

__all__ = ["load_swebench", "load_swebench_environment", "read_rows", "row_to_environment"]

DEFAULT_TIMEOUT = 1800.0
IMAGE_COLUMNS = ("image_name", "dockerhub_tag")
_WHERE = ("{suite} reads a local file of SWE-bench rows (JSONL or Parquet, with instance_id, "
          "base_commit, test_patch, FAIL_TO_PASS, PASS_TO_PASS and an image column such as "
          "dockerhub_tag): download the dataset where you have network, then pass it: "
          "load_environment('{suite}', path='rows.jsonl') or "
          "`deepgym-ray eval {suite} --path rows.jsonl`")


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a JSONL (``.jsonl``/``.json``) or Parquet (``.parquet``) file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no such file of SWE-bench rows: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not a JSON object: {exc}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got "
                             f"{type(row).__name__}")
        rows.append(row)
    return rows


def row_to_environment(row: dict[str, Any], *, suite: str = "swebench",
                       image_template: str | None = None, recipe: ImageRecipe | None = None,
                       timeout: float = DEFAULT_TIMEOUT, partial_credit: bool = False,
                       **task_options: Any) -> Environment:
    """One row as an environment (ValueError naming the instance and what is wrong)."""
    where = row.get("instance_id") or "a row without instance_id"
    try:
        task = PatchTask.model_validate({**row, **task_options, "partial_credit": partial_credit})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}"
                             for e in exc.errors())
        raise ValueError(f"{suite} row {where}: {problems}") from None
    image = next((str(row[c]) for c in IMAGE_COLUMNS if row.get(c)), None)
    if image is None and image_template is not None:
        image = image_template.format(**row)
    if image is None and recipe is None:
        raise ValueError(f"{suite} row {where}: no image (columns {', '.join(IMAGE_COLUMNS)}, "
                         "or give image_template or recipe)")
    return Environment(name=f"{suite}/{task.instance_id}", task=task.problem_statement,
                       patch_task=task, reference_solution=task.gold_patch, image=image,
                       image_recipe=None if image else recipe,
                       timeout=timeout, domain="repository", tags=["patch", suite])


def load_swebench(path: str | Path | None = None, *, suite: str = "swebench",
                  **options: Any) -> list[Environment]:
    """Every row of the file at ``path`` as an environment, in the file's order."""
    if path is None:
        raise ValueError(_WHERE.format(suite=suite))
    envs = [row_to_environment(row, suite=suite, **options) for row in read_rows(path)]
    if not envs:
        raise ValueError(f"{path} holds no rows")
    return envs


def load_swebench_environment(name: str, path: str | Path | None = None,
                              **options: Any) -> Environment:
    """One member, by ``SUITE/<instance_id>``."""
    suite = name.split("/", 1)[0]
    for env in load_swebench(path, suite=suite, **options):
        if env.name == name:
            return env
    raise ValueError(f"{path} has no instance {name.split('/', 1)[1]!r}")
