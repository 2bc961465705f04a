"""Terminal-Bench tasks in Harbor's task format, from a local folder of task folders.

A task folder holds ``instruction.md`` (the prompt), ``task.toml`` (``version``, ``[metadata]``,
``[verifier] timeout_sec``, ``[agent] timeout_sec``, ``[environment]`` with ``docker_image`` or
a build in ``environment/Dockerfile``, ``cpus``, ``memory_mb``, ``storage_mb``,
``allow_internet``), ``environment/`` (the Dockerfile and its context), ``tests/test.sh`` and
the files beside it, and ``solution/solve.sh`` (the reference answer). Each becomes one
environment named ``SUITE/<folder name>`` whose answer is a shell script (see
:mod:`deepgym_ray.scoring.terminal_judging`). Runs are always offline: a task that asks for
the internet (``allow_internet = true``) is refused with a clear error.

Example:
    envs = load_terminal_bench("tests/fixtures/terminal_bench")
    envs[0].name   # 'terminal_bench_2/build-word-index'
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe, TerminalTask

__all__ = ["is_harbor_task", "load_harbor_task", "load_terminal_bench",
           "load_terminal_bench_environment"]

DEFAULT_TIMEOUT = 600.0
_WHERE = ("{suite} reads a local folder of Harbor task folders (instruction.md, task.toml, "
          "environment/Dockerfile, tests/test.sh, solution/solve.sh): get the tasks where "
          "you have network, then pass the folder: load_environment('{suite}', path='tasks/') "
          "or `deepgym-ray eval {suite} --path tasks/`")


def is_harbor_task(folder: Path) -> bool:
    return (folder / "task.toml").is_file() and (folder / "tests" / "test.sh").is_file()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def load_harbor_task(folder: str | Path, *, suite: str = "terminal_bench",
                     **build_args: str) -> Environment:
    """One Harbor task folder as an environment (ValueError naming what is wrong)."""
    folder = Path(folder)
    if not is_harbor_task(folder):
        raise ValueError(f"{folder} is not a Harbor task (task.toml and tests/test.sh needed)")
    try:
        config: dict[str, Any] = tomllib.loads((folder / "task.toml").read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{folder / 'task.toml'}: {exc}") from None
    environment = config.get("environment", {})
    if environment.get("allow_internet"):
        raise ValueError(f"{folder.name}: the task asks for the internet (allow_internet); "
                         "deepgym_ray runs every task offline")
    image = environment.get("docker_image")
    recipe = None
    if image is None:
        if not (folder / "environment" / "Dockerfile").is_file():
            raise ValueError(f"{folder.name}: no environment/Dockerfile and no docker_image")
        recipe = ImageRecipe.from_folder(folder / "environment", **build_args)
    solution = folder / "solution" / "solve.sh"
    agent_timeout = float(config.get("agent", {}).get("timeout_sec", DEFAULT_TIMEOUT))
    task = TerminalTask(
        instruction=(folder / "instruction.md").read_text("utf-8")
        if (folder / "instruction.md").is_file() else "",
        tests=_files(folder / "tests"),
        solution=solution.read_text("utf-8") if solution.is_file() else None,
        agent_timeout=agent_timeout,
        verifier_timeout=float(config.get("verifier", {}).get("timeout_sec", DEFAULT_TIMEOUT)),
        workdir=environment.get("workdir", "/app"),
        memory_mb=int(environment.get("memory_mb", 2048)),
        storage_mb=int(environment.get("storage_mb", 2048)),
        cpus=float(environment.get("cpus", 1)))
    metadata = config.get("metadata", {})
    return Environment(name=f"{suite}/{folder.name}", task=task.instruction, terminal_task=task,
                       reference_solution=task.solution,
                       image=image, image_recipe=recipe,
                       timeout=agent_timeout + task.verifier_timeout,
                       difficulty=metadata.get("difficulty"), domain=metadata.get("category"),
                       tags=[str(t) for t in metadata.get("tags", [])])


def load_terminal_bench(path: str | Path | None = None, *, suite: str = "terminal_bench",
                        **build_args: str) -> list[Environment]:
    """Every Harbor task folder in ``path`` (or ``path`` itself when it is one), by name."""
    if path is None:
        raise ValueError(_WHERE.format(suite=suite))
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"no such folder of Harbor tasks: {root}")
    folders = [root] if is_harbor_task(root) else sorted(
        p for p in root.iterdir() if p.is_dir() and is_harbor_task(p))
    if not folders:
        raise ValueError(f"{root} holds no Harbor task folders (task.toml and tests/test.sh)")
    return [load_harbor_task(folder, suite=suite, **build_args) for folder in folders]


def load_terminal_bench_environment(name: str, path: str | Path | None = None,
                                    **build_args: str) -> Environment:
    """One member, by ``SUITE/<task folder>``."""
    suite, _, member = name.partition("/")
    for env in load_terminal_bench(path, suite=suite, **build_args):
        if env.name == name:
            return env
    raise ValueError(f"{path} has no Harbor task {member!r}")
