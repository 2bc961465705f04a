"""Running the real ``deepgym-ray`` entry point (the installed console script) as a process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENTRY_POINT = Path(sys.executable).with_name("deepgym-ray")

# A verifier that judges ANSWER = 42, and reports its own failure (exit 2, no verdict) for an
# answer that contains BREAK: a way to get runs without a verdict next to judged ones.
VERIFIER = '''\
import json
import sys

from deepgym_solution import solution_source

source = solution_source(sys.argv[1])
if "BREAK" in source:
    print(json.dumps({"score": 0.0, "passed": False, "details": "checker database down"}))
    sys.exit(2)
ok = "ANSWER = 42" in source
print(json.dumps({"score": 1.0 if ok else 0.0, "passed": ok}))
sys.exit(0 if ok else 1)
'''


def make_answer_env(folder: Path) -> Path:
    """An environment folder whose answer is ``ANSWER = 42``."""
    folder.mkdir(parents=True)
    (folder / "verifier.py").write_text(VERIFIER)
    (folder / "reference_solution.py").write_text("ANSWER = 42\n")
    (folder / "task.md").write_text("Set ANSWER to 42.\n")
    (folder / "metadata.json").write_text(json.dumps({"timeout": 30, "case_timeout": 10}))
    return folder


def make_outage_env(folder: Path) -> Path:
    """An environment folder whose verifier exits 2 every time: never a verdict."""
    folder.mkdir(parents=True)
    (folder / "task.md").write_text("Write anything.")
    (folder / "verifier.py").write_text("import sys\nsys.exit(2)\n")
    (folder / "metadata.json").write_text(json.dumps({"name": folder.name}))
    return folder


def write_jsonl(path: Path, rows, bom: bool = False) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


@contextlib.contextmanager
def ray_temp_dir():
    """A temp dir of its own for a Ray a subprocess starts (RAY_TMPDIR), removed afterwards:
    short, since Ray puts its sockets in it, and no `ray start` address file in it to find."""
    path = tempfile.mkdtemp(prefix="dgr", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cli(*argv, env: dict[str, str | None] | None = None, stdin: str | None = None,
        timeout: float = 600, leftovers: Path | None = None) -> subprocess.CompletedProcess:
    """``deepgym-ray ARGV...`` in a process of its own; Ray, if it starts, starts its own
    instance on 127.0.0.1 (a temp dir of its own: no `ray start` cluster to find). In ``env``,
    a value of None removes that variable. With ``leftovers``, the command runs under
    ``subreaper.py``, which writes there (JSON) the command lines of the processes it started
    that were still running 30 s after it ended: its own, never another test's."""
    run_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    given = (env or {}).get("RAY_TMPDIR")  # not this process's: a cluster may be recorded there
    with contextlib.nullcontext(given) if given else ray_temp_dir() as ray_dir:
        run_env["RAY_TMPDIR"] = ray_dir
        for key, value in (env or {}).items():  # None: leave the variable out
            if value is None:
                run_env.pop(key, None)
            else:
                run_env[key] = value
        command = [str(ENTRY_POINT), *map(str, argv)]
        if leftovers is not None:
            command = [sys.executable, str(Path(__file__).with_name("subreaper.py")),
                       str(leftovers), *command]
        return subprocess.run(command, env=run_env, text=True, input=stdin,
                              capture_output=True, timeout=timeout)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]
