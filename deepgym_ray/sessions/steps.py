"""The host half of one step: an action turned into a request for the in-sandbox step program
(``deepgym_ray/judge/deepgym_step.py``), run in the session's sandbox, and its reply turned into
what the agent sees.

Only the line of the step program's stdout that carries the step's random token is read: what
the agent's command prints travels inside it, quoted, and can never pose as the reply.

Example:
    request = action_request(Action(action_type="bash", content="ls"), timeout=30)
    reply = run_request(provider, sandbox, request, timeout=30)
    observation_text(reply, timeout=30)   # 'calc.py\\ntest_calc.py\\n[exit code 0]'
"""

from __future__ import annotations

import base64
import json
import secrets
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.judge import STEP
from deepgym_ray.sandboxes.base import CancelSignal, Sandbox, SandboxProvider
from deepgym_ray.sessions.shapes import Action

__all__ = ["MAX_COMMAND", "STEP", "StepRefused", "action_request",
           "observation_text", "run_request"]

# The step program's own start and cleanup, beyond the command's limit.
STEP_GRACE = 10.0
# A command travels as one argument (the kernel takes at most 128 KiB per argument).
MAX_COMMAND = 100_000
MAX_WRITE = 8 << 20
OUTPUT_LIMIT = 64 << 10

# Runs as the agent: it can write only where the agent can.
_WRITE = ("import os,sys\n"
          "p=sys.argv[1];d=os.path.dirname(p)\n"
          "d and os.makedirs(d,exist_ok=True)\n"
          "data=sys.stdin.buffer.read()\n"
          "with open(p,'wb') as f: f.write(data)\n"
          "print(f'wrote {len(data)} bytes to {p}')\n")


class StepRefused(ValueError):
    """An action that cannot be run as given (too long); the agent is told, the episode goes
    on."""


def action_request(action: Action, timeout: float) -> dict[str, Any]:
    """The step request that carries out ``action`` (not ``done``, which runs nothing)."""
    if action.action_type == "write_file":
        data = action.content.encode("utf-8", "surrogateescape")
        if len(data) > MAX_WRITE:
            raise StepRefused(f"the file is {len(data)} bytes; at most {MAX_WRITE} can be "
                              "written in one action")
        return {"argv": ["python3", "-I", "-S", "-c", _WRITE, action.path],
                "stdin": base64.b64encode(data).decode("ascii"), "timeout": timeout}
    if len(action.content.encode("utf-8", "surrogateescape")) > MAX_COMMAND:
        raise StepRefused(f"the {action.action_type} action is longer than {MAX_COMMAND} "
                          "bytes; write it to a file first (write_file) and run that")
    if "\x00" in action.content:
        raise StepRefused(f"the {action.action_type} action holds a NUL byte")
    argv = ["bash", "-c", action.content] if action.action_type == "bash" \
        else ["python3", "-c", action.content]
    return {"argv": argv, "timeout": timeout}


# The first line of a start whose check of the task's tools failed (nothing runs before it).
MISSING_TOOLS = "deepgym: not on the agent's PATH:"


def files_request(files: Mapping[str, bytes], setup: str | None, timeout: float,
                  tools: Sequence[str] = ()) -> dict[str, Any]:
    """The session's first request: the agent's files, then (as the agent) a check that each
    of ``tools`` is on its PATH, then ``setup``."""
    request: dict[str, Any] = {
        "files": {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}}
    script = setup or ""
    if tools:
        script = (f"missing=''\nfor t in {' '.join(map(shlex.quote, tools))}; do\n"
                  "  command -v -- \"$t\" >/dev/null 2>&1 || missing=\"$missing $t\"\ndone\n"
                  f"if [ -n \"$missing\" ]; then echo \"{MISSING_TOOLS}$missing\" >&2; "
                  "exit 127; fi\n") + script
    if script:
        request.update(argv=["bash", "-s"], timeout=timeout,
                       stdin=base64.b64encode(script.encode("utf-8")).decode("ascii"))
    return request


def run_request(provider: SandboxProvider, sandbox: Sandbox, request: dict[str, Any], *,
                timeout: float, cancel: CancelSignal | None = None,
                env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run the step program on ``request`` in ``sandbox``; its reply. SandboxError when it
    gave none (a reply whose ``ok`` is false names what failed in its ``error``)."""
    token = secrets.token_hex(16)
    body = dict(request, token=token, output_limit=OUTPUT_LIMIT)
    body.update(provider.solution_launch(sandbox))
    extra = {"cancel": cancel} if cancel is not None and provider.cancellable else {}
    outcome = provider.run(sandbox, [provider.python, "-I", "-S", "-B", STEP],
                           timeout=timeout + STEP_GRACE,
                           stdin=(json.dumps(body) + "\n").encode("utf-8"), env=env, **extra)
    prefix = token.encode() + b" "
    for line in reversed(outcome.stdout.splitlines()):
        if line.startswith(prefix):
            try:
                reply = json.loads(line[len(prefix):])
            except ValueError:
                break
            if isinstance(reply, dict):
                return reply
            break
    if outcome.timed_out:  # the step program itself overran: the command is what hung
        return {"ok": True, "timed_out": True, "exit_code": None, "stdout": "", "stderr": "",
                "dropped": 0, "duration": timeout}
    tail = outcome.stderr[-1500:].decode("utf-8", "replace").strip()
    raise SandboxError(f"the step ended without a reply (exit code {outcome.exit_code}): "
                       f"{tail}", sandbox_id=sandbox.id)


def observation_text(reply: Mapping[str, Any], timeout: float) -> str:
    """What the agent reads of a command's reply: its output, then how it ended."""
    parts = [text for text in (reply.get("stdout"), reply.get("stderr")) if text]
    text = "".join(part if part.endswith("\n") else part + "\n" for part in parts)
    if reply.get("dropped"):
        text += f"[{reply['dropped']} more bytes of output left out]\n"
    if reply.get("timed_out"):
        text += (f"[the command ran past the step's limit of {timeout:g}s and was stopped; "
                 "its output so far is above]")
    else:
        text += f"[exit code {reply.get('exit_code')}]"
    return text
