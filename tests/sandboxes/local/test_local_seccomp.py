"""The local sandbox's syscall filter (``deepgym_ray/sandboxes/local/seccomp.py``): solution
processes (forked by the zygote, or started by bwrap) and the verifier's process (forked by
the runner fork server, or exec'd) are all under it; the calls Docker's default profile denies
answer EPERM, the kernel-wide /proc files are empty, ordinary work goes on, and where the
binding is missing the provider still runs and says so."""

from __future__ import annotations

import json
import logging
import platform
import sys

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local import LocalProvider, report, seccomp

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the probes use x86-64 system call numbers")

# Each probe returns (result, errno) of one raw system call (x86-64 numbers), or the status
# lines that say whether a filter is installed. Nothing here succeeds without leaving a trace
# only where the filter is missing, and then only in the run's own uid.
PROBES = '''
import ctypes, os, threading

def _calls():
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {"add_key": (248, b"user", b"deepgym-test", b"v", 1, -4),  # into the uid's keyring
             "keyctl": (250, 0, 0, 0, 0, 0), "request_key": (249, b"user", b"x", None, 0),
             "io_uring_setup": (425, 1, None), "ptrace": (101, 16, os.getppid(), 0, 0),
             "bpf": (321, 0, None, 0), "perf_event_open": (298, None, 0, -1, -1, 0),
             "userfaultfd": (323, 0), "finit_module": (313, -1, b"", 0),
             "unshare_user": (272, 0x10000000), "clone3": (435, None, 0)}
    out = {}
    for name, args in calls.items():
        result = libc.syscall(*args)
        out[name] = [result, ctypes.get_errno() if result == -1 else 0]
    return out

def _status():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {"seccomp": fields["Seccomp"].strip(), "filters": fields["Seccomp_filters"].strip()}

def _work():  # a thread (clone3 is ENOSYS: the C library falls back), a fork, a socket pair
    box = []
    thread = threading.Thread(target=box.append, args=(1,))
    thread.start()
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(5)
    import socket
    a, b = socket.socketpair()
    a.sendall(b"x")
    forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 5
    return box == [1] and forked and b.recv(1) == b"x"
'''

SOLUTION = PROBES + '''
def probe():
    files = {}
    for name in ("keys", "key-users", "timer_list"):
        try:
            with open("/proc/" + name) as f:
                files[name] = f.read()
        except OSError as exc:
            files[name] = repr(exc)
    return {"calls": _calls(), "status": _status(), "work": _work(), "files": files}
'''

# The verifier's own process shows its filter in /proc/self/status; the calls are made by a
# child it starts (which inherits the filter), since the judge refuses raw system calls
# through ctypes in its own process.
VERIFIER = PROBES + f"\nPROBES = {PROBES!r}\n" + '''
import json, subprocess, sys
from deepgym_solution import load_solution

CHILD = PROBES + "\\nimport json\\nprint(json.dumps([_calls(), _status(), _work()]))\\n"

def verify(solution_path, test_cases_path=None):
    done = subprocess.run([sys.executable, "-I", "-S", "-c", CHILD], capture_output=True,
                          timeout=30, check=True)
    calls, status, work = json.loads(done.stdout)
    mine = {"calls": calls, "status": _status(), "child_status": status, "work": work}
    theirs = load_solution(solution_path).probe()
    return {"score": 1.0, "passed": True,
            "details": json.dumps({"verifier": mine, "solution": theirs})}
'''

EPERM, ENOSYS = 1, 38
DENIED = ("add_key", "keyctl", "request_key", "io_uring_setup", "ptrace", "bpf",
          "perf_event_open", "userfaultfd", "finit_module", "unshare_user")


def judge(provider: LocalProvider) -> dict:
    env = Environment(name="seccomp-probe", verifier_code=VERIFIER, timeout=30, case_timeout=15)
    result = DeepGym(mode="local", provider=lambda: provider, backend="threads").run(env,
                                                                                     SOLUTION)
    assert result.has_verdict and result.score == 1.0, result.details
    return json.loads(result.details)


def assert_filtered(report: dict) -> None:
    assert report["status"]["seccomp"] == "2", report["status"]
    for name in DENIED:
        assert report["calls"][name] == [-1, EPERM], (name, report["calls"][name])
    assert report["calls"]["clone3"] == [-1, ENOSYS]
    assert report["work"] is True


def make(**options) -> LocalProvider:
    provider = LocalProvider(**options)
    if provider.seccomp is None:
        pytest.skip(f"no syscall filter here: {seccomp.missing}")
    if not provider.as_root or provider.bwrap is None:
        pytest.skip("these paths need root and bubblewrap")
    return provider


@pytest.mark.parametrize("paths", [
    {"fork_server": True, "solution_zygote": True},  # the warm paths
    {"fork_server": False, "solution_zygote": False},  # runner exec'd, solution by bwrap
], ids=["forked", "exec"])
def test_solution_and_verifier_are_filtered(paths):
    provider = make(**paths)
    try:
        if paths["solution_zygote"]:
            assert provider.zygote is not None
        report = judge(provider)
    finally:
        provider.close()
    assert_filtered(report["solution"])
    assert_filtered(report["verifier"])
    files = report["solution"]["files"]
    assert files["keys"] == "" and files["key-users"] == "", files  # masked, as in Docker


def test_without_the_filter_the_same_probe_sees_none():
    """The check above can fail: with the filter off, the verifier's process has none."""
    provider = LocalProvider(seccomp=False, solution_zygote=False)
    env = Environment(name="seccomp-off", timeout=30, case_timeout=15, verifier_code=PROBES + '''
def verify(solution_path, test_cases_path=None):
    import json
    return {"score": 1.0, "passed": True, "details": json.dumps(_status())}
''')
    try:
        result = DeepGym(mode="local", provider=lambda: provider, backend="threads").run(
            env, "x = 1\n")
    finally:
        provider.close()
    assert provider.isolation["syscall_filter"] is False
    assert json.loads(result.details)["seccomp"] == "0"


def test_the_filter_is_built_by_libseccomp_and_denies_the_list():
    pytest.importorskip("pyseccomp")
    bpf = seccomp.sandbox_filter(True)
    assert bpf is not None and len(bpf) % 8 == 0, seccomp.missing
    # Unprivileged bwrap needs a user namespace: that filter leaves them open.
    assert seccomp.sandbox_filter(False) != bpf
    assert {"add_key", "keyctl", "request_key", "io_uring_setup", "ptrace", "bpf",
            "perf_event_open", "init_module", "kexec_load"} <= set(seccomp.DENIED)


def test_without_the_binding_it_runs_and_warns(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # what an install without it sees
    seccomp.sandbox_filter.cache_clear()
    report._WARNED.clear()
    try:
        with caplog.at_level(logging.WARNING, logger="deepgym_ray.sandboxes.local"):
            provider = LocalProvider(solution_zygote=False)
        assert provider.seccomp is None and provider.isolation["syscall_filter"] is False
        assert "no syscall filter" in caplog.text and "pyseccomp" in caplog.text
        env = Environment(name="seccomp-missing", timeout=30, case_timeout=15,
                          verifier_code="def verify(solution_path, test_cases_path=None):\n"
                                        "    return 1.0\n")
        result = DeepGym(mode="local", provider=lambda: provider, backend="threads").run(
            env, "x = 1\n")
        provider.close()
        assert result.score == 1.0, result.details
    finally:
        seccomp.sandbox_filter.cache_clear()
        report._WARNED.clear()
