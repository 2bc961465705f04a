"""The reaper: what a command started dies with it, and only that.

A command started by another command (a script that runs ``deepgym-ray eval`` in a subprocess
after running one in process) gets a tag below its parent's: when the child ends, its reaper
kills the child's processes and never the parent's (the embedded Ray the parent still uses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from deepgym_ray.pool.reaper import TAG_VARIABLE, tagged_processes

# A command: starts its reaper, then a long sleep that carries its tag, then (if asked) runs a
# nested command of the same kind and waits for it. Prints what it started, as JSON lines.
COMMAND = textwrap.dedent("""
    import json, os, subprocess, sys
    from deepgym_ray.pool.reaper import start_reaper
    tag = start_reaper()
    sleeper = subprocess.Popen(["sleep", "120"])
    print(json.dumps({"tag": tag, "sleeper": sleeper.pid}), flush=True)
    if sys.argv[1] == "nest":
        subprocess.run([sys.executable, "-c", sys.argv[2], "leaf", ""], check=True,
                       stdin=subprocess.DEVNULL)
    sys.stdin.read()  # until the test closes our stdin
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return "State:\tZ" not in handle.read()
    except OSError:
        return False


def _gone(pid: int, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_a_nested_command_reaps_its_own_processes_and_never_its_parents():
    env = {k: v for k, v in os.environ.items() if k != TAG_VARIABLE}
    parent = subprocess.Popen([sys.executable, "-c", COMMAND, "nest", COMMAND], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        outer = json.loads(parent.stdout.readline())
        inner = json.loads(parent.stdout.readline())
        assert inner["tag"].startswith(outer["tag"] + "/")
        # The nested command has ended (its stdin was empty): its sleeper is reaped ...
        assert _gone(inner["sleeper"]), "the nested command's process outlived it"
        # ... and the parent's, which carries the parent's tag, is not.
        time.sleep(0.5)
        assert _alive(outer["sleeper"]), "the nested command's reaper killed its parent's process"
        assert outer["sleeper"] in tagged_processes(outer["tag"])
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)
    assert _gone(outer["sleeper"]), "the parent command's process outlived it"
    # The watchdog's sweep goes on until a pass finds none (a killed process may take a
    # moment to exit on a busy machine): wait for that, not for a fixed instant.
    deadline = time.monotonic() + 30
    while tagged_processes(outer["tag"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged_processes(outer["tag"]) == []


def test_the_watchdog_holds_none_of_the_commands_stdio():
    # A reader of the command's output sees its end when the command ends (the watchdog's
    # stdin, stdout and stderr are /dev/null, not the command's pipes).
    script = textwrap.dedent("""
        import os, time
        from deepgym_ray.pool.reaper import start_reaper
        start_reaper()
        me = str(os.getpid())
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] != me:
                        continue
                deadline = time.monotonic() + 10  # the watchdog redirects right after the fork
                while True:
                    links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1, 2)]
                    if set(links) == {"/dev/null"} or time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                print(" ".join(links))
            except OSError:
                pass
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          stdin=subprocess.PIPE, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["/dev/null"] * 3, done.stdout


HOLD = """
import os, sys, time
path, mode = sys.argv[1], sys.argv[2]
if mode == "write":
    held = [open(path, "a")]
else:  # a walker and a reader: a directory descriptor (as rmtree holds), the log read-only
    held = [os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY), open(path)]
print("ready", flush=True)
time.sleep(60)
"""


def _holding(path, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_only_the_sessions_writers_started_since_the_command_count_as_its_ray(tmp_path):
    # A Ray session directory named for a command (pid 4242, made now); Ray's processes write
    # their logs in it. A process that only walks or reads it (``rm -r`` of the temp dir, the
    # script that ran the command and cleans up after it) must never be taken for Ray's.
    from deepgym_ray.pool.reaper import session_processes

    since = time.time()
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(since + 1)) + "_123456"
    log = tmp_path / f"session_{stamp}_4242" / "logs" / "raylet.out"
    log.parent.mkdir(parents=True)
    log.write_text("")
    writer, walker = _holding(log, "write"), _holding(log, "walk")
    try:
        found = session_processes(4242, since)
        assert writer.pid in found and walker.pid not in found, found
        # processes older than the command, holding the same files, are not its Ray either
        assert session_processes(4242, time.time() + 30) == []
    finally:
        for proc in (writer, walker):
            proc.kill()
            proc.wait()
