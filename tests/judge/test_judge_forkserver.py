"""The runner fork server: runs go through it, survive its death, stay independent of each
other, and never let a solution near it; plus the cleanup proof that lets destroy() skip its
sweep by uid, and the sweep where no proof is given."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from helpers.judge_probe import processes_with

from deepgym_ray.client import DeepGym
from deepgym_ray.exceptions import TimeoutError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local import LocalProvider, runbox

SOLUTION = "def answer():\n    return 41\n"

CHECK_VERIFIER = '''
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    return float(load_solution(solution_path).answer() == 41)
'''

# Leaves a mark in the runner's shared modules, and reports marks left by earlier runs.
LEAK_VERIFIER = '''
import random, sys
import deepgym_solution

def verify(solution_path, test_cases_path=None):
    seen = getattr(deepgym_solution, "LEAKED", None)
    deepgym_solution.LEAKED = "run"
    sys.modules["deepgym_leak"] = object()
    draw = random.random()
    return {"score": 0.0 if seen else 1.0, "details": repr((seen, draw))}
'''

# The runner's (trusted) file descriptors, as link targets.
FDS_VERIFIER = '''
import os

def verify(solution_path, test_cases_path=None):
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink("/proc/self/fd/" + fd))
        except OSError:
            pass
    return {"score": 1.0, "details": "|".join(links)}
'''

# The solution hunts for the fork server: a socket among its descriptors, or its process.
HUNT_SOLUTION = '''
import os

def answer():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith("socket:"):
                found.append("socket fd " + fd)
        except OSError:
            pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if b"forkserver" in f.read():
                        found.append("process " + pid)
            except OSError:
                pass
    return found
'''

HUNT_VERIFIER = '''
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    found = load_solution(solution_path).answer()
    return {"score": 0.0 if found else 1.0, "details": repr(found)}
'''


def env(verifier: str, **fields) -> Environment:
    fields = {"timeout": 20, "case_timeout": min(5.0, fields.get("timeout", 20)), **fields}
    return Environment(name="forkserver", verifier_code=verifier, **fields)


@pytest.fixture()
def client():
    provider = LocalProvider()
    yield DeepGym(provider=provider)
    provider.close()


def test_runs_go_through_the_fork_server(client):
    # On a loaded machine the server's first start can miss its report's deadline: that run
    # falls back to exec (right all the same) and the next starts a fresh server.
    for _ in range(3):
        result = client.run(env(CHECK_VERIFIER), SOLUTION)
        assert result.score == 1.0 and result.has_verdict
        if client.provider.fork_server.pid is not None:
            break
    assert client.provider.fork_server.pid is not None


def test_a_run_after_the_server_was_killed_still_works(client):
    assert client.run(env(CHECK_VERIFIER), SOLUTION).score == 1.0
    server = client.provider.fork_server.pid
    os.kill(server, signal.SIGKILL)
    time.sleep(0.1)
    for _ in range(3):  # the first may fall back to exec; the next start a fresh server
        result = client.run(env(CHECK_VERIFIER), SOLUTION)
        assert result.score == 1.0 and result.has_verdict
    assert client.provider.fork_server.pid not in (None, server)


def test_without_a_fork_server_runs_exec_the_runner():
    provider = LocalProvider(fork_server=False)
    result = DeepGym(provider=provider).run(env(CHECK_VERIFIER), SOLUTION)
    assert result.score == 1.0 and provider.fork_server is None


def test_runs_are_independent(client):
    results = [client.run(env(LEAK_VERIFIER), SOLUTION) for _ in range(3)]
    assert [r.score for r in results] == [1.0, 1.0, 1.0], [r.details for r in results]
    draws = {r.details for r in results}
    assert len(draws) == 3  # each run's random state is its own, not the server's copy


def test_the_runner_holds_no_descriptor_of_the_server(client):
    client.run(env(CHECK_VERIFIER), SOLUTION)
    server = client.provider.fork_server.pid
    server_sockets = set()
    for fd in os.listdir(f"/proc/{server}/fd"):
        link = os.readlink(f"/proc/{server}/fd/{fd}")
        if link.startswith("socket:"):
            server_sockets.add(link)
    assert server_sockets
    result = client.run(env(FDS_VERIFIER), SOLUTION)
    assert not server_sockets & set(result.details.split("|"))


def test_a_solution_cannot_reach_the_fork_server(client):
    result = client.run(env(HUNT_VERIFIER), HUNT_SOLUTION)
    assert result.has_verdict and result.score == 1.0, result.details


def test_a_clean_run_skips_the_uid_sweep_and_leaves_nothing(client, monkeypatch):
    if not client.provider.isolation["separate_uid"]:
        pytest.skip("no separate uid here: there is no sweep by uid")
    sweeps = []
    monkeypatch.setattr(runbox, "kill_uid", lambda uid: sweeps.append(uid))
    mark = "DGMARK" + uuid.uuid4().hex[:12]
    solution = f'''
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", "{mark}"])
    os._exit(0)
def answer():
    return 41
'''
    assert client.run(env(CHECK_VERIFIER), solution).score == 1.0
    assert processes_with(mark) == []
    if client.provider.isolation["namespaces"]:
        assert sweeps == []  # the runner proved its solution processes gone


@pytest.mark.slow
def test_a_runner_killed_at_the_deadline_leaves_nothing(client):
    # The verifier ignores the runner's own alarm, so the host kills the runner; with no
    # proof of a clean end, destroy() sweeps by uid.
    mark = "DGMARK" + uuid.uuid4().hex[:12]
    solution = f'''
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "{mark}"],
                 start_new_session=True)
def answer():
    return 41
'''
    verifier = '''
import signal, time
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    load_solution(solution_path).answer()
    while True:
        time.sleep(0.05)
'''
    started = time.monotonic()
    result = client.run_safe(env(verifier, timeout=1.0), solution)
    assert not result.passed and result.score == 0.0
    assert result.error_type in ("solution_timeout", "timeout")
    assert processes_with(mark) == []
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_verifier_that_hangs_before_the_solution_raises_timeout(client):
    verifier = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n" \
               "while True:\n    time.sleep(0.05)\n"
    with pytest.raises(TimeoutError):
        client.run(env(verifier, timeout=1.0), SOLUTION)


# Reports that the solution is in play, then waits for the test's go (bounded).
GATED_VERIFIER = '''
import os, time
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    got = load_solution(solution_path).answer()
    open(@STARTED@, "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(@GO@) and time.monotonic() < deadline:
        time.sleep(0.01)
    return float(got == 41)
'''


def _gated_run(client, tmp_path):
    """Start a run in a thread; returns (thread, box for its result, go file) once the
    verifier has the solution's answer (the solution is in play)."""
    import threading

    started, go = tmp_path / "started", tmp_path / "go"
    verifier = GATED_VERIFIER.replace("@STARTED@", repr(str(started))).replace(
        "@GO@", repr(str(go)))
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=client.run_safe(
        env(verifier, timeout=60), SOLUTION)))
    thread.start()
    deadline = time.monotonic() + 60
    while not started.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started.exists(), box
    return thread, box, go


def test_a_run_whose_fork_server_dies_gets_no_verdict_never_a_zero(client, tmp_path):
    client.run(env(CHECK_VERIFIER), SOLUTION)  # the server is up
    thread, box, go = _gated_run(client, tmp_path)
    os.kill(client.provider.fork_server.pid, signal.SIGKILL)
    thread.join(60)
    go.touch()
    result = box["result"]
    assert not result.has_verdict and result.error_type == "sandbox_error", result
    assert "fork server died" in result.details


def test_closing_the_fork_server_lets_the_runs_in_flight_finish(client, tmp_path):
    thread, box, go = _gated_run(client, tmp_path)
    server = client.provider.fork_server.pid
    client.provider.fork_server.close()
    go.touch()
    thread.join(60)
    assert box["result"].score == 1.0 and box["result"].has_verdict, box["result"]
    assert client.provider.fork_server.pid is None
    deadline = time.monotonic() + 30  # the closed server exits once its last run is done
    while os.path.exists(f"/proc/{server}") and time.monotonic() < deadline:
        try:
            os.waitpid(server, os.WNOHANG)
        except ChildProcessError:
            break
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/{server}")
