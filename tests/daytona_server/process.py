"""``process.exec`` as Daytona's daemon runs it: the command written to the first of zsh,
bash and sh on its stdin (not ``-c``: a command that reads stdin reads the script's next
line), the call's variables in the process's environment (never on a command line), stdout
and stderr into one buffer, a timeout killing the command's process group and answered
HTTP 408; a variable name the daemon refuses is 400. In bench mode a judge run seen before
(by the spec in its environment, see ``replay``) is answered from its first run.

Example:
    response = execute(box, ExecuteRequest(command="echo hi", envs={"A": "1"}), None, None)
    response.result  # 'hi\n'
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import PurePosixPath

from daytona_api_client import SandboxState
from daytona_toolbox_api_client import ExecuteRequest, ExecuteResponse

from deepgym_ray.sandboxes.remote.command import SPEC_FILE, SPEC_VARIABLE

from .box import Box, HttpError
from .replay import Replays

OUTPUT_LIMIT = 32 << 20
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what the daemon's ValidateEnvKeys takes
SHELLS = ("/usr/bin/zsh", "/bin/zsh", "/usr/bin/bash", "/bin/bash", "/bin/sh")


def environ(box: Box) -> dict[str, str]:
    """The environment commands start with in ``box``."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": box.home}


def execute(box: Box, req: ExecuteRequest, replays: Replays | None,
            started: Callable[[], None] | None) -> ExecuteResponse:
    """Answer one ``process.exec`` call in ``box`` (``started``: called once the command
    runs; ``replays``: bench mode)."""
    envs = req.envs or {}
    bad = next((key for key in envs if not ENV_KEY.fullmatch(key)), None)
    if bad is not None:
        raise HttpError(400, f"invalid environment variable name: '{bad}'")
    uploaded, box.uploaded = box.uploaded, []
    spec = envs.get(SPEC_VARIABLE)
    key = None if replays is None else \
        replays.key(uploaded + [(SPEC_FILE, spec.encode())] if spec else uploaded)
    replayed = replays.answer(key) if replays is not None else None
    if replayed is not None:
        code, out, _ = replayed
        box.write([(p, c) for p, c in uploaded if "/judge/" in p])
    else:
        box.write(uploaded)
        code, out = run(box, req.command, req.cwd, envs, req.timeout or 10, started)
        if replays is not None:
            replays.remember(key, code, out, b"")
    return ExecuteResponse(exit_code=code if code is not None else -1,
                           result=out.decode("utf-8", "replace"))


def run(box: Box, command: str, cwd: str | None, env: dict[str, str], timeout: float,
        started: Callable[[], None] | None = None) -> tuple[int | None, bytes]:
    """Run ``command`` in ``box`` as the daemon does: (its exit code, its mixed output)."""
    if box.state != SandboxState.STARTED:
        raise HttpError(409, f"Sandbox {box.id} is not started (state {box.state.value})")
    workdir = str(PurePosixPath(box.home) / (cwd or ""))
    shell = next(s for s in SHELLS if box.path(s).exists())
    argv = [shell]
    if box.container is not None:
        argv, workdir = box.container.argv(f"exec {shell}", workdir), "/"
    elif box.request.network_block_all and os.geteuid() == 0:
        # As Daytona does for such a sandbox: no network at all (a loopback of its own).
        argv = ["unshare", "--net", *argv]
    proc = subprocess.Popen(argv, cwd=workdir, env={**environ(box), **env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    box.procs.add(proc)
    if started is not None:  # (a fault: the sandbox disappears while the command runs)
        started()
    timed_out = False
    try:
        out, _ = proc.communicate(command.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    finally:
        box.procs.discard(proc)
        box.touch()  # a command's end is activity too: its idle time starts now
    if box.state == SandboxState.DESTROYED:
        raise HttpError(404, f"Sandbox with ID or name {box.id} not found")
    if timed_out:
        raise HttpError(408, "command execution timeout")
    return proc.returncode, out[:OUTPUT_LIMIT]
