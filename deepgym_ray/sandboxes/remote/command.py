"""The host's side of a judge run in a reused remote sandbox: its files, its command, its report.

A run is one command, the in-sandbox program (``in_sandbox``, as ``RUN_PROGRAM``), and its
spec (``SPEC_FILE``: its files, the runner's argv, stdin and environment, the deadline, the
solution's uid and its bounds), which rides in the command's environment where the cloud's
command takes one (:func:`spec_then_run`) and is uploaded as one file otherwise; once per
sandbox the judge's files go in with the program and the cgroups, seccomp and one-stream
modules it uses. The command's argv names only that program and paths: what every process
in the sandbox can read in /proc/PID/cmdline carries no secret. The program reports on its
last stderr line (see :func:`read_report`), or, with one output stream, after the end of
its stdout (:func:`split_one_stream`).

Example:
    >>> session_command("/root/deepgym/judge", "/root/deepgym/r1")
    'python3 -I -S -B /root/deepgym/judge/deepgym_remote_run.py /root/deepgym/r1'
    >>> session_command("/home/daytona/deepgym/judge", "/home/daytona/deepgym/r1",
    ...                 ["sudo", "-n", "/usr/bin/python3"])  # doctest: +ELLIPSIS
    'sudo -n /usr/bin/python3 -I -S -B /home/daytona/deepgym/judge/deepgym_remote_run.py ...'
"""

from __future__ import annotations

import hashlib
import json
import platform
import posixpath
import shlex
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from deepgym_ray.judge import sandbox_judge_files
from deepgym_ray.sandboxes.local.seccomp import sandbox_filter
from deepgym_ray.sandboxes.local.seccomp import wanted as seccomp_wanted

SPEC_FILE = ".deepgym-run"
CLEAN_MARKER = ".deepgym-clean"  # the runner's proof that its solution processes are gone
RUN_PROGRAM = "deepgym_remote_run.py"
CGROUPS_MODULE = "deepgym_remote_cgroups.py"
CGROUP_V2_MODULE = "deepgym_remote_cgroup_v2.py"
SECCOMP_MODULE = "deepgym_remote_seccomp.py"
STREAM_MODULE = "deepgym_remote_stream.py"
SPEC_VARIABLE = "DEEPGYM_RUN_SPEC"  # where a spec travels in the command's environment
# What one environment string may hold (Linux's MAX_ARG_STRLEN, 128 KiB), with room to spare:
# a larger spec is uploaded as a file.
SPEC_IN_ENVIRONMENT_MAX = 96 * 1024
REPORT_PREFIX = b"deepgym-run "
END_PREFIX = "deepgym-end "


@lru_cache(maxsize=1)
def judge_files() -> tuple[tuple[str, bytes], ...]:
    """What every sandbox gets once: the judge, the in-sandbox program, its cgroups modules
    (v1's and its seccomp installer are the local provider's own, so both providers bound a
    run's processes the same way; v2's) and its one-stream output (``one_stream``)."""
    here = Path(__file__).parent
    files = dict(sandbox_judge_files())
    files[RUN_PROGRAM] = (here / "in_sandbox.py").read_bytes()
    files[CGROUPS_MODULE] = (here.parent / "local" / "cgroups.py").read_bytes()
    files[CGROUP_V2_MODULE] = (here / "cgroup_v2.py").read_bytes()
    files[SECCOMP_MODULE] = (here.parent / "local" / "deepgym_seccomp.py").read_bytes()
    files[STREAM_MODULE] = (here / "one_stream.py").read_bytes()
    return tuple(sorted(files.items()))


@lru_cache(maxsize=1)
def judge_digest() -> str:
    """What identifies :func:`judge_files` (a sandbox that has them gets them once)."""
    hasher = hashlib.sha256()
    for name, data in judge_files():
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


@lru_cache(maxsize=1)
def syscall_filter() -> dict[str, str] | None:
    """The local sandbox's syscall filter for the runner and its solution processes, compiled
    here for this machine's architecture (the program installs it only on the same one);
    None where it cannot be built here or ``DEEPGYM_SECCOMP=0``."""
    bpf = sandbox_filter(True) if seccomp_wanted() else None
    return None if bpf is None else {"machine": platform.machine(), "bpf": bpf.hex()}


def solution_dir(run_dir: str) -> str:
    """Where the solution runs: a directory the runner's files are not in."""
    return f"{run_dir}-s/work"


def run_spec(*, files: Mapping[str, bytes], argv: Sequence[str], stdin: bytes | None,
             env: Mapping[str, str], timeout: float, uid: int | None, disk_mb: int,
             max_files: int, memory_mb: int, pids: int, path: str | None = None,
             keep_work: bool = False, end: str = "") -> bytes:
    """The run's spec file (read and removed by the in-sandbox program before the run, which
    writes ``files``, relative paths to bytes, into the run's directory first); ``path`` is
    the runner's PATH where the program's own is not the sandbox user's (under sudo);
    ``keep_work``: an agent's session, whose work area lasts from run to run; ``end``: the
    run's secret end-of-output mark (see :func:`output_complete`)."""
    return json.dumps({
        "files": {name: bytes(data).decode("latin-1") for name, data in files.items()},
        "argv": list(argv), "stdin": (stdin or b"").decode("utf-8", "surrogateescape"),
        "env": dict(env), "timeout": float(timeout), "uid": uid, "disk_mb": int(disk_mb),
        "max_files": int(max_files), "memory_mb": int(memory_mb), "pids": int(pids),
        "path": path, "seccomp": syscall_filter(), "keep_work": bool(keep_work),
        "end": end,
    }).encode("utf-8", "surrogateescape")


def session_command(judge_dir: str, run_dir: str, python: Sequence[str] = ("python3",),
                    one_stream: bool = False) -> str:
    """The session command of one run: the in-sandbox program and the run's directory;
    ``python`` starts the program (``sudo -n <python>`` where the user is not root);
    ``one_stream``: all of the run's output on stdout (see :func:`split_one_stream`)."""
    line = shlex.join([*python, "-I", "-S", "-B", f"{judge_dir}/{RUN_PROGRAM}", run_dir])
    # Before the program takes its stderr, what Python says goes to stdout too.
    return f"{line} --one-stream 2>&1" if one_stream else line


def spec_then_run(spec_path: str, command: str, source: str) -> list[str]:
    """The argv of one command that writes a run's spec root-only at ``spec_path`` and then
    runs the session ``command``: the spec comes from the command's stdin (``source="stdin"``)
    or from its environment variable :data:`SPEC_VARIABLE` (``"environment"``; removed before
    the program starts, so nothing the run starts inherits it). A run is then one call, not an
    upload and a command; its argv names paths only, no secret.

    Example:
        >>> spec_then_run("/root/deepgym/r1/.deepgym-run", "python3 run.py", "stdin")[:2]
        ['sh', '-c']
    """
    if source not in ("stdin", "environment"):
        raise ValueError(f"source must be 'stdin' or 'environment', not {source!r}")
    write = 'cat > "$2"' if source == "stdin" else \
        f'printf %s "${SPEC_VARIABLE}" > "$2" && unset {SPEC_VARIABLE}'
    script = f'u=$(umask) && umask 077 && mkdir -p -- "$1" && {write} && umask "$u" ' \
        '&& exec bash -c "$3"'
    return ["sh", "-c", script, "sh", posixpath.dirname(spec_path), spec_path, command]


def spec_variable(spec: bytes, limit: int = SPEC_IN_ENVIRONMENT_MAX) -> dict[str, str] | None:
    """The command's environment that carries ``spec`` (:data:`SPEC_VARIABLE`), or None when
    it does not fit in one variable of at most ``limit`` characters (or is not ASCII; a
    spec is JSON, so it is, and holds no NUL).

    Example:
        >>> spec_variable(b'{"a": 1}'), spec_variable(b"x" * 10, limit=8)
        ({'DEEPGYM_RUN_SPEC': '{"a": 1}'}, None)
    """
    if len(spec) > limit or not spec.isascii():
        return None
    return {SPEC_VARIABLE: spec.decode("ascii")}


def read_report(stderr: bytes) -> dict[str, Any] | None:
    """The program's report (its last stderr line), or None when it did not get to write it."""
    lines = stderr.rstrip(b"\n").splitlines()
    if not lines or not lines[-1].startswith(REPORT_PREFIX):  # only ours comes last
        return None
    try:
        report = json.loads(lines[-1][len(REPORT_PREFIX):])
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def end_line(end: str) -> bytes:
    """What the program writes on stdout after everything of the run, its report excepted."""
    return f"\n{END_PREFIX}{end}\n".encode()


def output_complete(stdout: bytes, stderr: bytes, end: str) -> bool:
    """Whether a run's output is all there: its stdout's end mark and its report (a
    provider that reads the output before the command's end is known, Modal's, asks for
    the exit status only when not). The mark is secret: a solution cannot end its output
    early."""
    return end_line(end) in stdout and read_report(stderr) is not None


def split_one_stream(output: bytes, end: str) -> tuple[bytes, bytes]:
    """A one-stream run's stdout and stderr (see :func:`session_command`): the end mark ends
    the first, the stderr's tail and the report come after it. Without the mark (the program
    did not get to its end) all of it is taken as stderr, for the error's message.

    Example:
        >>> split_one_stream(b"out" + end_line("e1") + b"err\\n", "e1")
        (b'out\\ndeepgym-end e1\\n', b'err\\n')
    """
    before, found, after = output.partition(end_line(end))
    return (before + found, after) if found else (b"", output)


def strip_end(stdout: bytes, end: str) -> bytes:
    """The runner's stdout: what came before the end mark (after it: nothing of the run's)."""
    before, found, _ = stdout.rpartition(end_line(end))
    return before if found else stdout


def strip_report(stderr: bytes) -> bytes:
    """The runner's stderr without the program's report."""
    lines = stderr.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(REPORT_PREFIX))


def missing_confinement(report: Mapping[str, Any]) -> list[str]:
    """What per-run confinement the sandbox did not allow, in words (for the warning)."""
    words = {
        "namespaces": "no mount, IPC and network namespaces of the run's own: the solution "
                      "can reach the sandbox's toolbox daemon on its loopback (which runs "
                      "commands for anyone who connects) and the shared temporary places",
        "work_area": "no tmpfs work area: the solution's disk space is limited per file "
                     "only, inodes not at all (the sandbox's own disk bounds the run)",
        "cgroups": "no per-run cgroups: memory is limited per solution process only (the "
                   "sandbox's own memory bounds the run, the judge included), and the run's "
                   "processes are found by uid",
        "syscall_filter": "no syscall filter: kernel keyrings, io_uring, ptrace and new user "
                          "namespaces are open to the solution and the verifier",
    }
    missing = report.get("missing") or {}
    return [f"{words.get(name, name)} ({why})" for name, why in sorted(missing.items())]
