"""Root for the in-sandbox program where the sandbox's user is not root: ``sudo -n``.

Every run's confinement (``in_sandbox``) needs root: a uid of its own for the solution,
namespaces, a tmpfs, cgroups. Daytona's default sandbox user is ``daytona``, which its images
give passwordless sudo; so a sandbox whose user is not root is probed once, when it is made
(one command, :func:`probe_command`, run by the provider): which ``python3`` its user runs,
that user's ``PATH``, and whether
``sudo -n`` runs that interpreter as root. Where it does, every run's program is started as
``sudo -n <python> -I -S -B <judge>/deepgym_remote_run.py <run dir>``: the same program, as
root, with exactly a root sandbox's confinement. sudo resets the environment (``PATH`` to its
``secure_path``; the program builds the runner's environment itself and is given the user's
``PATH`` back), so nothing of the user's environment reaches the program but that. Where sudo
is missing or asks for a password, runs go on as the user, weaker, with a warning that says
what to change. A later run whose ``sudo -n`` fails gets no report, so no verdict, and its
sandbox is deleted: never a run less confined than the sandbox's first, in silence.

Example:
    >>> found = read_probe('deepgym-root {"euid": 1000, "python": "/usr/bin/python3", '
    ...                    '"path": "/usr/bin:/bin", "sudo": "ok"}')
    >>> found.via, found.program_prefix()
    ('sudo', ['sudo', '-n', '/usr/bin/python3'])
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

PROBE_PREFIX = "deepgym-root "
# Run as the sandbox's user, by its python3; prints one line: PROBE_PREFIX + JSON.
_PROBE = r"""
import json, os, shutil, subprocess, sys
found = {"euid": os.geteuid(), "python": sys.executable, "path": os.environ.get("PATH")}
sudo = shutil.which("sudo")
if found["euid"] == 0:
    found["sudo"] = None
elif sudo is None:
    found["sudo"] = "sudo is not installed"
else:
    check = [sudo, "-n", sys.executable, "-I", "-S", "-B", "-c", "import os; print(os.geteuid())"]
    try:
        done = subprocess.run(check, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        ok = done.returncode == 0 and done.stdout.strip() == b"0"
        found["sudo"] = "ok" if ok else (said[-1] if said else f"exit code {done.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        found["sudo"] = f"{type(exc).__name__}: {exc}"
print("deepgym-root " + json.dumps(found), flush=True)
"""


@dataclass(frozen=True)
class RootAccess:
    """How runs in one sandbox get root: ``via`` "user" (it is root), "sudo", or None (not
    at all: ``why_not`` says why); ``python`` and ``path`` are its user's."""

    python: str | None = None
    path: str | None = None
    via: str | None = "user"
    why_not: str | None = None

    @property
    def as_root(self) -> bool:
        return self.via is not None

    @property
    def runner_path(self) -> str | None:
        """The PATH the program gives the runner where its own is not the user's (sudo's)."""
        return self.path if self.via == "sudo" else None

    def program_prefix(self) -> list[str]:
        """How the in-sandbox program is started: its interpreter, through sudo if needed."""
        if self.via == "sudo":
            return ["sudo", "-n", self.python or "python3"]
        return ["python3"]


def probe_command() -> str:
    """The probe, a shell command run as the sandbox's user."""
    return shlex.join(["python3", "-I", "-S", "-B", "-c", _PROBE])


def read_probe(output: str) -> RootAccess:
    """What the probe found (its output's last line); ValueError when it did not report."""
    lines = [line for line in output.splitlines() if line.startswith(PROBE_PREFIX)]
    if not lines:
        raise ValueError(f"no report: {output[-300:].strip() or 'no output'}")
    found = json.loads(lines[-1][len(PROBE_PREFIX):])
    python, path, sudo = found.get("python"), found.get("path"), found.get("sudo")
    if found.get("euid") == 0:
        return RootAccess(python=python, path=path, via="user")
    if sudo == "ok":
        return RootAccess(python=python, path=path, via="sudo")
    return RootAccess(python=python, path=path, via=None, why_not=str(sudo))


def weaker_warning(service: str, user: Any, why_not: str | None) -> str:
    """The warning for a sandbox whose runs cannot be root: what is lost, and the fix."""
    return (f"{service} sandbox user is {user!r}, not root, and `sudo -n` cannot make it root "
            f"({why_not}): each run's solution runs as that user (it can read the verifier "
            "and its test cases), with none of the per-run confinement, and each sandbox "
            "serves one run. Use a snapshot or image whose user is root, or give its user "
            "passwordless sudo")
