"""One command in a local sandbox: the judge runner forked by the warm fork server, or any
command exec'd as a process group of its own. Output is bounded, and the command is killed at
its deadline or once its caller gives up (``wake``); :class:`LocalProvider` then proves the
rest of the run gone.

Example:
    proc_list = []
    run_exec(["python3", "-c", "print(1)"], "/tmp/run", {"PATH": "/usr/bin"}, timeout=5,
             stdin=None, wake=None, output_limit=1 << 20, procs=proc_list).stdout
    # b'1\\n'
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge.deepgym_proc import Drain, wait_exit
from deepgym_ray.sandboxes.base import CommandResult
from deepgym_ray.sandboxes.local.forkserver import RunnerForkServer

__all__ = ["kill_group", "run_exec", "run_forked"]

logger = logging.getLogger(__name__)

MB = 1 << 20


def run_forked(server: RunnerForkServer, cwd: Path, environ: Mapping[str, str], *,
               timeout: float, stdin: bytes | None, wake: int | None,
               output_limit: int, program: str = "runner") -> CommandResult | None:
    """The judge runner (or a session's step program), forked by the warm ``server`` in
    ``cwd``; None when the server is unusable (the caller execs it then). SandboxError when
    the server dies mid-run."""
    started = time.monotonic()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        run = server.start_runner(str(cwd), environ, (in_r, out_w, err_w), program)
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    if run is None:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        return None
    try:
        with os.fdopen(in_w, "wb") as pipe:
            pipe.write(stdin or b"")
    except OSError:
        pass  # it died at once; its exit code says so
    try:
        timed_out, out, err = run.collect((out_r, err_r), (output_limit, MB), timeout, wake)
    finally:
        run.close()
        os.close(out_r)
        os.close(err_r)
    if run.lost:  # our fork server died under the run: an outage, never the answer's 0
        raise SandboxError("the runner fork server died during the run; the answer was not "
                           "judged", sandbox_id=cwd.name)
    return CommandResult(exit_code=None if timed_out else run.returncode, stdout=out,
                         stderr=err, timed_out=timed_out, duration=time.monotonic() - started)


def run_exec(command: Sequence[str], cwd: Path | str, environ: Mapping[str, str], *,
             timeout: float, stdin: bytes | None, wake: int | None, output_limit: int,
             procs: list[subprocess.Popen],
             preexec: Callable[[], None] | None = None) -> CommandResult:
    """``command`` as a new session in ``cwd``; its process is added to ``procs`` as soon as it
    exists (so that the sandbox's cleanup finds it, whatever happens here). ``preexec`` runs
    in the child before the exec (the seccomp filter's installer, which allocates nothing)."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(list(command), cwd=cwd, env=dict(environ),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                preexec_fn=preexec)
    except (OSError, subprocess.SubprocessError) as exc:  # the latter: preexec failed
        raise SandboxError(f"cannot start {command[0]!r}: {exc}",
                           sandbox_id=Path(cwd).name) from exc
    procs.append(proc)
    out, err = Drain(proc.stdout, output_limit), Drain(proc.stderr, MB)
    try:
        proc.stdin.write(stdin or b"")
        proc.stdin.close()
    except OSError:
        pass  # it died at once; its exit code says so
    timed_out = not wait_exit(proc, timeout, wake)
    kill_group(proc)  # at the deadline (or given up), and whatever it left behind
    out.join(5)
    err.join(5)
    return CommandResult(exit_code=None if timed_out else proc.returncode,
                         stdout=bytes(out.data), stderr=bytes(err.data),
                         timed_out=timed_out, duration=time.monotonic() - started)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group and reap it (bounded)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not wait_exit(proc, 10):
        logger.error("process %s survived SIGKILL for 10s", proc.pid)
