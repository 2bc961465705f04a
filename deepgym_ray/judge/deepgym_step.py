"""One step of an agent's session, in its sandbox (stdlib only).

Started by the host (``deepgym_ray.sessions``) as ``python3 -I -S -B deepgym_step.py``, like the
judge runner, with the same rights. Its first stdin line is a JSON request holding a per-step
random ``token``; its reply goes to its own stdout as ``<token> <json>``, where nothing the agent
runs can write (the agent's command gets pipes of its own, and file descriptor 1 points at
stderr meanwhile).

A request (every key but ``token`` and ``solution_dir`` optional):
- ``files``: relative path -> base64 content, written into the agent's work directory (the
  run's ``solution_dir``) before anything else runs, by a process of the agent's own (so they
  are the agent's, and it writes only where the agent could); on the session's first request;
- ``argv``, ``stdin`` (base64), ``timeout``, ``output_limit``: one command run as the agent, in
  its work directory, with the provider's isolation (``launch``, as for the runner's solution
  processes: its uid, namespaces, limits, cgroups), for at most ``timeout`` wall-clock seconds;
- ``env``: variables for the command.

Every process the command started ends with the step, background ones included: nothing the
agent starts outlives the request that started it (the provider then proves it, as after a run).

The reply: ``exit_code`` (None when killed at the deadline), ``timed_out``, ``stdout`` and
``stderr`` (text, at most ``output_limit`` bytes each), ``dropped`` (bytes left out),
``duration`` and ``clean`` (every process proven gone).

Example (what the host sends on stdin):
    {"token": "9f...", "solution_dir": "/tmp/.../work", "launch": {...},
     "argv": ["bash", "-c", "pytest -q"], "timeout": 30}
"""

import base64
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT_LIMIT = 64 << 10


# Writes the agent's starting files, run as the agent: it can write only where the agent can.
UNPACK = ("import base64,json,os,sys\n"
          "for name,data in json.load(sys.stdin).items():\n"
          " d=os.path.dirname(name)\n"
          " d and os.makedirs(d,exist_ok=True)\n"
          " with open(name,'wb') as f: f.write(base64.b64decode(data))\n")


def run_command(request, spawn, proc_tools):
    """Run the request's command as the agent; the reply's fields."""
    limit = int(request.get("output_limit") or OUTPUT_LIMIT)
    timeout = float(request.get("timeout") or 30)
    stdin = request["raw_stdin"] if "raw_stdin" in request \
        else base64.b64decode(request.get("stdin") or "")
    cwd = spawn.solution_dir()
    env = {"HOME": cwd, "TMPDIR": cwd, "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(request.get("env") or {})
    started = time.monotonic()
    proc = spawn.spawn({"mode": "exec", "argv": list(request["argv"])}, cwd, env,
                       (subprocess.PIPE,) * 3)
    out = proc_tools.Drain(proc.stdout, limit)
    err = proc_tools.Drain(proc.stderr, limit)
    feeder = _Feeder(proc.stdin, stdin)
    exited = proc_tools.wait_exit(proc, timeout)
    duration = time.monotonic() - started
    spawn.kill(proc)  # its background processes too (its namespace, session or cgroup)
    feeder.close()
    out.join(5)
    err.join(5)
    return {"exit_code": proc.returncode if exited else None, "timed_out": not exited,
            "stdout": out.text(), "stderr": err.text(), "dropped": out.dropped + err.dropped,
            "duration": duration}


class _Feeder:
    """Writes the command's stdin on a thread of its own (a command that never reads it must
    not block the step)."""

    def __init__(self, stream, data):
        import threading

        self.stream = stream
        self.thread = threading.Thread(target=self._write, args=(data,), daemon=True)
        self.thread.start()

    def _write(self, data):
        try:
            if data:
                self.stream.write(data)
        except (OSError, ValueError):
            pass
        finally:
            self.close()

    def close(self):
        try:
            self.stream.close()
        except (OSError, ValueError):
            pass


def main():
    real_out = os.dup(1)  # the only way out for the reply; not inherited by children
    os.dup2(2, 1)
    request = json.loads(sys.stdin.readline())
    sys.stdin.close()
    sys.path.insert(0, HERE)
    import deepgym_proc
    import deepgym_spawn

    launch = request.get("launch") or {}
    deepgym_spawn.configure(launch=launch, solution_dir=request["solution_dir"])
    reply = {}
    try:
        if request.get("files"):
            placed = run_command({"argv": ["python3", "-I", "-S", "-c", UNPACK],
                                  "raw_stdin": json.dumps(request["files"]).encode(),
                                  "timeout": request.get("timeout")},
                                 deepgym_spawn, deepgym_proc)
            if placed["exit_code"] != 0:
                raise OSError(f"the agent's files could not be written: "
                              f"{placed['stderr'][-1000:]}")
        if request.get("argv"):
            reply.update(run_command(request, deepgym_spawn, deepgym_proc))
        reply["ok"] = True
    except Exception as exc:  # noqa: BLE001 - reported to the host, which decides
        reply.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    reply["clean"] = deepgym_spawn.shutdown_all()
    marker = request.get("clean_marker")
    if marker:  # a marker left by an earlier request proves nothing of this one
        try:
            os.unlink(marker)
        except OSError:
            pass
    line = (request["token"] + " " + json.dumps(reply) + "\n").encode("utf-8", "replace")
    view = memoryview(line)
    while view:
        view = view[os.write(real_out, view):]


if __name__ == "__main__":
    main()
