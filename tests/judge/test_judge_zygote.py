"""The warm solution zygote: its children are the run's own uid with no capabilities, cannot
reach each other's directories, the zygote's socket or the zygote itself, leave nothing behind,
and runs still pass (through bwrap) when the zygote is gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.judge.deepgym_proc import uid_processes as _uid_processes
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local import LocalProvider

REPORT_VERIFIER = '''
import json
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    report = load_solution(solution_path).probe()
    return {"score": 1.0, "passed": True, "details": json.dumps(report)}
'''

STATUS = '''
import os

def _status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return fields

def _parent_cmdline():
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as exc:
        return repr(exc)
'''


@pytest.fixture
def provider():
    box = LocalProvider(solution_zygote=True)
    if box.zygote is None:
        pytest.skip("the solution zygote needs bubblewrap and root")
    yield box
    box.close()


def judge(provider, solution: str, timeout: float = 20) -> dict:
    env = Environment(name="zygote-probe", verifier_code=REPORT_VERIFIER, timeout=timeout,
                      case_timeout=timeout / 2)
    client = DeepGym(mode="local", provider=lambda: provider, backend="threads")
    result = client.run(env, solution)
    assert result.has_verdict, result.details
    return json.loads(result.details)


def test_child_is_the_runs_uid_without_capabilities(provider):
    report = judge(provider, STATUS + '''
def probe():
    s = _status()
    return {"cap": s["CapEff"][0], "prm": s["CapPrm"][0], "nnp": s["NoNewPrivs"][0],
            "uid": s["Uid"], "gid": s["Gid"], "groups": s.get("Groups", []),
            "parent": _parent_cmdline(), "fds": sorted(os.listdir("/proc/self/fd")),
            "ppid": s["PPid"][0], "pidns": os.readlink("/proc/self/ns/pid"),
            "ns": [os.readlink("/proc/self/ns/" + n) for n in ("net", "ipc")],
            "loopback": _loopback()}

def _loopback():  # the loopback works, as in bwrap's network namespace
    import socket
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client.connect(server.getsockname())
        return True
''')
    assert report["loopback"] is True
    zygotes = [pid for pid in _descendants(provider.zygote.pid)
               if b"solution zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert zygotes
    for pid in zygotes:  # its own network and IPC namespaces: nothing shared with other runs
        theirs = [os.readlink(f"/proc/{pid}/ns/{n}") for n in ("net", "ipc")]
        assert report["ns"][0] != theirs[0] and report["ns"][1] != theirs[1], theirs
    assert int(report["cap"], 16) == 0 and int(report["prm"], 16) == 0
    assert report["nnp"] == "1"
    assert len(set(report["uid"])) == 1 and int(report["uid"][0]) >= 1 << 20
    assert report["gid"] == report["uid"] and report["groups"] == []
    # It was forked by the zygote, not bwrap: the zygote is its parent, in the zygote's PID
    # namespace (it sees the pid, but not the process: /proc hides other uids' processes).
    inner = {Path(f"/proc/{pid}/status").read_text().split("NSpid:")[1].split("\n")[0].split()[-1]
             for pid in zygotes}
    assert report["ppid"] in inner
    assert report["pidns"] in {os.readlink(f"/proc/{pid}/ns/pid") for pid in zygotes}
    assert "FileNotFoundError" in report["parent"]  # cannot see its parent (another uid)


def test_a_change_to_a_preloaded_module_stays_in_its_own_run(provider):
    # The zygote imports what solutions commonly use (typing, re, ...) once; each run gets its
    # own copy: what one run does to them, the next never sees.
    tamper = """
import random, re, typing
typing.List = "tampered"
re.compile = None
random.seed(1234)
def probe():
    return {"list": repr(typing.List), "random": random.random()}
"""
    look = """
import random, re, typing
def probe():
    return {"list": repr(typing.List), "compile": callable(re.compile),
            "random": random.random(), "preloaded": "typing" in __import__("sys").modules}
"""
    tampered = judge(provider, tamper)
    assert tampered["list"] == "'tampered'"
    after = [judge(provider, look) for _ in range(2)]
    for report in after:
        assert report["list"] == "typing.List" and report["compile"] and report["preloaded"]
    # random re-seeds in every forked child: neither the tampered seed nor one shared stream
    assert len({tampered["random"], after[0]["random"], after[1]["random"]}) == 3


def test_runs_cannot_reach_each_others_directories(provider):
    other = provider.create(Environment(name="other", verifier_code=REPORT_VERIFIER))
    try:
        secret_dir = other.handle.solution_dir
        (secret_dir / "secret.txt").write_text("other run's file")
        os.chown(secret_dir / "secret.txt", other.handle.uid, other.handle.uid)
        report = judge(provider, f'''
import os
TARGET = {str(secret_dir)!r}

def _try(action):
    try:
        action()
        return "worked"
    except OSError as exc:
        return type(exc).__name__

def probe():
    root = os.path.dirname(os.path.dirname(os.getcwd()))
    return {{"read": _try(lambda: open(TARGET + "/secret.txt").read()),
            "write": _try(lambda: open(TARGET + "/planted", "w").write("x")),
            "list": _try(lambda: os.listdir(TARGET)),
            "list_root": _try(lambda: os.listdir(root)),
            "write_root": _try(lambda: open(root + "/planted", "w").write("x")),
            "write_tmp": _try(lambda: open("/tmp/planted", "w").write("x")),
            "write_shm": _try(lambda: open("/dev/shm/planted", "w").write("x"))}}
''')
        assert set(report.values()) <= {"PermissionError", "FileNotFoundError",
                                        "OSError"}, report
        assert not (secret_dir / "planted").exists()
    finally:
        provider.destroy(other)


def test_child_cannot_reach_the_zygote_socket_or_signal_it(provider):
    path = provider.zygote.socket_path()
    report = judge(provider, f'''
import os, signal, socket

def probe():
    out = {{"sockets": [], "killed": [], "connect": None}}
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith("socket:"):
                out["sockets"].append(fd)
        except OSError:
            pass
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect({path!r})
        out["connect"] = "worked"
    except OSError as exc:
        out["connect"] = type(exc).__name__
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                os.kill(int(entry), signal.SIGKILL)
                out["killed"].append(entry)
            except OSError:
                pass
    return out
''')
    assert report["sockets"] == [] and report["killed"] == []
    assert report["connect"] == "FileNotFoundError"
    before = provider.zygote.pid
    judge(provider, STATUS + "def probe():\n    return _status()['Uid']\n")
    assert provider.zygote.pid == before  # the zygote survived the attempt


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


def test_a_dead_zygote_falls_back_to_bwrap_and_restarts(provider):
    # Who started it tells by its PID namespace: the zygote's own, or a fresh one of bwrap's
    # (its parent's command line is hidden: /proc shows it no process of another uid).
    probe = "import os\ndef probe():\n    return os.readlink('/proc/self/ns/pid')\n"
    judge(provider, probe)  # the zygote is up
    first = provider.zygote.pid
    zygote_ns = {os.readlink(f"/proc/{pid}/ns/pid") for pid in _descendants(first)}
    assert judge(provider, probe) in zygote_ns
    # Held open, the dead zygote's namespaces stay allocated: the kernel cannot hand their
    # inode numbers to bwrap's new namespace, which would make the two look the same.
    held = []
    for pid in _descendants(first):
        with contextlib.suppress(OSError):
            held.append(os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY))
    try:
        for pid in _descendants(first) + [first]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        provider.zygote.socket_path = lambda: None  # as if it could not be restarted
        assert judge(provider, probe) not in zygote_ns  # bwrap started it instead
    finally:
        for fd in held:
            os.close(fd)
    del provider.zygote.socket_path
    restarted = judge(provider, probe)  # a new zygote started it
    assert provider.zygote.pid not in (None, first)
    assert restarted in {os.readlink(f"/proc/{pid}/ns/pid")
                         for pid in _descendants(provider.zygote.pid)}


def test_nothing_of_the_runs_uid_survives_a_fork_bomb_and_background_process(provider):
    report = judge(provider, '''
import os, time

def probe():
    uid = os.getuid()
    if os.fork() == 0:  # a background process in its own session, forking away
        os.setsid()
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    time.sleep(0.3)
    return {"uid": uid}
''', timeout=30)
    deadline = time.monotonic() + 5
    while _uid_processes(report["uid"]) and time.monotonic() < deadline:
        time.sleep(0.05)  # the host's destroy() runs just after the result is returned
    assert _uid_processes(report["uid"]) == []


def test_a_zygote_that_dies_mid_run_leaves_no_verdict(provider):
    """Our zygote dying takes the run's solution processes with it: that is an outage, not the
    answer's 0, so the run has no verdict (and a batch would retry it)."""
    import threading

    from deepgym_ray.exceptions import SandboxError

    judge(provider, "def probe():\n    return 1\n")  # the zygote is up
    first = provider.zygote.pid

    def kill_soon() -> None:
        # Once the zygote has forked the run's solution (a process it did not have idle),
        # whatever the machine's speed: then the run is in play.
        idle, deadline = set(_descendants(first)), time.monotonic() + 120
        while not set(_descendants(first)) - idle and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in _descendants(first) + [first]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    killer = threading.Thread(target=kill_soon)
    killer.start()
    env = Environment(name="zygote-probe", verifier_code=REPORT_VERIFIER, timeout=20,
                      case_timeout=10)
    client = DeepGym(mode="local", provider=lambda: provider, backend="threads")
    slow = "import time\n\ndef probe():\n    time.sleep(5)\n    return 1\n"
    with pytest.raises(SandboxError, match="zygote died"):
        client.run(env, slow)
    killer.join()
    result = client.run_safe(env, "def probe():\n    return 2\n")  # a new zygote serves it
    assert result.has_verdict and result.score == 1.0
