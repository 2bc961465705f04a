"""Run a command as a child subreaper, and report what it left running.

    python subreaper.py REPORT.json COMMAND [ARGS...]

Every process the command starts, however it detaches (a new session, a double fork), is
reparented to this one when its parent dies, instead of to the machine's init: so what is left
once the command ended is exactly the command's own, never another test's. Waits up to
``DEEPGYM_LEFTOVER_WAIT`` seconds (30) for them to exit on their own, writes the command lines
of those still running to REPORT.json, kills them, and exits with the command's exit code.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def _children():
    """Live children of this process (zombies are reaped here)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    found = {}
    me = str(os.getpid())
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2:].split()
            if fields[1].decode() == me and fields[0] != b"Z":
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found[int(entry)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, ValueError, IndexError):
            continue
    return found


def main():
    report, command = sys.argv[1], sys.argv[2:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"subreaper: prctl failed: {os.strerror(ctypes.get_errno())}")
    code = subprocess.call(command)
    deadline = time.monotonic() + float(os.environ.get("DEEPGYM_LEFTOVER_WAIT", "30"))
    left = _children()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _children()
    with open(report, "w") as f:
        json.dump(sorted(left.values()), f)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(code)


if __name__ == "__main__":
    main()
