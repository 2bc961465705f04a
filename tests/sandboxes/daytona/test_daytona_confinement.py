"""A run's confinement inside a Daytona sandbox (see the provider's module docstring): the
real ``daytona`` SDK against the local server (tests/daytona_server), whose sandboxes are
containers with a root user, with Daytona's default user ``daytona`` and passwordless sudo, or
with a user that cannot become root."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import time
from pathlib import Path

import pytest
from helpers.remote_setup import ENV, WRONG, options

from deepgym_ray.client import DeepGym
from deepgym_ray.exceptions import SandboxError

pytest.importorskip("daytona")

from deepgym_ray.sandboxes.daytona import DaytonaProvider  # noqa: E402


@pytest.fixture(params=["root", "sudo"])
def either_server(request):
    """A sandbox user of root, or (Daytona's default) ``daytona`` with passwordless sudo: a
    run must get the same confinement in both."""
    if request.param == "root":
        return request.getfixturevalue("daytona_root_server")
    return request.getfixturevalue("daytona_server")


LEAKER = ("import os, time\n"
          "open('/tmp/deepgym-leak', 'w').write('left')\n"
          "if os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n    os._exit(0)\n"
          "def coin_change(coins, amount):\n    return -1\n")


class _Recording(DaytonaProvider):
    """Keeps every sandbox it hands out (to look at them after the runs), and says when it
    has deleted one."""

    def __init__(self, **options):
        super().__init__(**options)
        self.made = []
        self.deleted = queue.SimpleQueue()

    def create(self, env):
        sandbox = super().create(env)
        self.made.append(sandbox)
        return sandbox

    def _delete(self, remote):
        super()._delete(remote)
        self.deleted.put(remote.id)


@contextlib.contextmanager
def _judging(server, **extra):
    """A client on a recording provider for ``server``; both closed (their sandboxes deleted)
    after."""
    provider = _Recording(**options(server, **extra))
    client = DeepGym(provider=provider, backend="threads")
    try:
        yield client, provider
    finally:
        client.close()
        provider.close()


def _inside(server, sandbox, path):
    """A path of the sandbox (a container of the test server) as this machine sees it."""
    return server.boxes[sandbox.handle.remote.id].container.path(path)


def _writable_judge_files(server, sandbox):
    """The judge's files (and its directory, and the bytecode of its modules) that anyone but
    root owns or may write: code that later runs execute as root."""
    judge = _inside(server, sandbox, sandbox.handle.remote.judge_dir)
    found = []
    for path in [judge, *judge.rglob("*")]:
        info = path.lstat()
        if info.st_uid != 0 or info.st_gid != 0 or info.st_mode & 0o022:
            found.append(f"{path.name}: uid {info.st_uid} mode {oct(info.st_mode)}")
    return found


def _left_in_sandbox(server, sandbox):
    """What the runs left in the sandbox: run directories, mounts, cgroups, temp files."""
    box = server.boxes[sandbox.handle.remote.id]
    deepgym = _inside(server, sandbox, f"{box.home}/deepgym")
    left = [f"dir {p.name}" for p in deepgym.iterdir() if p.name != "judge"]
    mounts = Path(f"/proc/{box.container.pid}/mountinfo").read_text().splitlines()
    left += [f"mount {line.split()[4]}" for line in mounts if "/deepgym/" in line]
    groups = box.container.groups["memory"]
    left += [f"cgroup {g.name}" for g in groups.iterdir() if g.name.startswith("deepgym-")]
    if _inside(server, sandbox, "/tmp/deepgym-leak").exists():
        left.append("/tmp/deepgym-leak")
    return left


def test_sandboxes_are_reused_cleaned_and_deleted_on_close(either_server):
    """A sandbox serves the next run once nothing of the last one is left (processes, files,
    mounts, cgroups, the judge's files root's alone), whether its user is root or becomes
    root through sudo; close deletes it."""
    server = either_server
    provider = _Recording(**options(server))
    client = DeepGym(provider=provider, backend="threads")
    assert client.run_safe(ENV, LEAKER).has_verdict
    assert client.run(ENV, ENV.reference_solution).score == 1.0
    made = provider.made
    assert len({s.handle.remote.id for s in made}) == 1  # one sandbox served both runs
    for sandbox in made:  # nothing the runs started is left (the server runs them here)
        assert not _processes_of(sandbox.handle.uid), sandbox
    assert _left_in_sandbox(server, made[0]) == []
    assert _writable_judge_files(server, made[0]) == []
    # compiled once, by root: every later run's processes load the judge's bytecode
    judge = _inside(server, made[0], made[0].handle.remote.judge_dir)
    assert {p.name.split(".")[0] for p in (judge / "__pycache__").glob("*.pyc")} >= \
        {"deepgym_runner", "deepgym_remote_cgroups", "deepgym_proc", "deepgym_solution"}
    held = provider.live_sandboxes()
    assert held and set(held) <= set(server.live_sandboxes())
    client.close()
    provider.close()
    assert not set(held) & set(server.live_sandboxes())


PROBE_VERIFIER = """
import json
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    facts = load_solution(solution_path).facts()
    return {"score": 1.0, "passed": True, "details": json.dumps(facts)}
"""

PROBE = """
import os, socket

def _group(controller):
    for line in open("/proc/self/cgroup").read().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return "/sys/fs/cgroup/" + controller + path

def _can(what, path):
    try:
        if what == "list":
            os.listdir(path)
        else:
            open(path).close()
        return True
    except OSError:
        return False

def facts():
    run_dir = os.path.dirname(os.getcwd())[:-len("-s")]
    judge = os.path.join(os.path.dirname(run_dir), "judge")
    judge_files = [judge] + [os.path.join(judge, n) for n in os.listdir(judge)]
    environs = b""
    for p in os.listdir("/proc"):
        try:
            environs += open(f"/proc/{p}/environ", "rb").read()
        except OSError:
            pass
    vfs = os.statvfs(".")
    try:
        socket.create_connection(("127.0.0.1", 2280), timeout=2).close()
        daemon = "reached"
    except OSError:
        daemon = "unreachable"
    cmdlines = b"".join(open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc")
                        if p.isdigit() and os.path.exists(f"/proc/{p}/cmdline"))
    return {"disk": vfs.f_blocks * vfs.f_frsize, "inodes": vfs.f_files,
            "tmp_is_the_work_area": os.stat("/tmp").st_dev == os.stat(".").st_dev,
            "memory": int(open(_group("memory") + "/memory.limit_in_bytes").read()),
            "pids": open(_group("pids") + "/pids.max").read().strip(),
            "daemon": daemon, "secret_in_a_cmdline": b"not-for-cmdlines" in cmdlines,
            "secret_in_an_environ": b"not-for-cmdlines" in environs,
            "uid": os.getuid(), "gid": os.getgid(),
            "run_dir_listed": _can("list", run_dir),
            "verifier_read": _can("read", os.path.join(run_dir, "verifier.py")),
            "test_cases_read": _can("read", os.path.join(run_dir, "test_cases.json")),
            "judge_writable": [p for p in judge_files if os.access(p, os.W_OK)]}
"""


def test_each_run_is_held_by_bounds_of_its_own_inside_the_sandbox(either_server):
    """The per-run bounds are the provider's own (a tmpfs of disk_mb/max_files that /tmp is
    part of, cgroups below the sandbox's memory, a uid of its own that can read none of the
    run's secrets), not the sandbox's: the attacks of the battery fail on these, and would on
    the real service wherever the sandbox allows them. A sandbox whose user is not root but
    has passwordless sudo (Daytona's default) gets exactly what a root one does."""
    from deepgym_ray.models import Environment

    server = either_server
    env = Environment(name="probe", verifier_code=PROBE_VERIFIER, timeout=30, case_timeout=10,
                      env_vars={"DG_PROBE": "not-for-cmdlines"}, test_cases=[{"n": 1}])
    with _judging(server, disk_mb=64, max_files=500, max_processes=40) as (client, provider):
        facts = json.loads(client.run(env, PROBE).details)
        assert provider.made[0].handle.remote.root.via == (
            "sudo" if server.sandbox_user else "user")
    uid = facts.pop("uid")
    assert uid >= 1 << 20 and facts.pop("gid") == uid  # neither root's nor the sandbox user's
    assert facts == {"disk": 64 << 20, "inodes": 500, "tmp_is_the_work_area": True,
                     "memory": (1024 - 256) << 20, "pids": "40", "daemon": "unreachable",
                     "secret_in_a_cmdline": False, "secret_in_an_environ": False,
                     "run_dir_listed": False, "verifier_read": False, "test_cases_read": False,
                     "judge_writable": []}


@pytest.fixture(scope="module")
def unprivileged_server():
    """A server whose sandboxes are default (unprivileged) containers: nothing inside can
    mount, make namespaces or cgroups."""
    from daytona_server import DaytonaTestServer

    server = DaytonaTestServer(privileged=False).start()
    try:
        yield server
    finally:
        server.stop()


def test_an_unprivileged_sandbox_judges_right_and_says_what_it_lacks(unprivileged_server,
                                                                     caplog):
    server = unprivileged_server
    with _judging(server) as (client, provider):
        with caplog.at_level(logging.WARNING, logger="deepgym_ray.sandboxes"):
            leaked = client.run_safe(ENV, LEAKER)
            assert leaked.has_verdict and not leaked.passed
            assert client.run(ENV, ENV.reference_solution).score == 1.0
        warnings = [r.getMessage() for r in caplog.records if "confinement" in r.getMessage()]
        assert len(warnings) <= 1  # once per process and message (an earlier test may have)
        # Cleanup is still proven (by the run's uid) and what the leaker left in the shared
        # /tmp removed, so the sandbox served the second run too.
        made = provider.made
        assert len({s.handle.remote.id for s in made}) == 1
        assert not _processes_of(made[0].handle.uid)
        assert _left_in_sandbox(server, made[0]) == []
        # The syscall filter needs no capability (no_new_privs instead), so it still holds.
        assert made[0].handle.remote.confinement == dict(dict.fromkeys(
            ("namespaces", "work_area", "cgroups"), False), syscall_filter=True)


@pytest.fixture(scope="module")
def no_sudo_server():
    """A server whose sandboxes' user is ``daytona`` and whose sudo asks for a password (so
    ``sudo -n`` fails, as where sudo is missing)."""
    from daytona_server import DaytonaTestServer

    try:
        server = DaytonaTestServer(user="daytona", sudo="password", contain=True).start()
    except RuntimeError as exc:
        pytest.skip(f"no Daytona test server with a sudo user here: {exc}")
    try:
        yield server
    finally:
        server.stop()


def test_a_user_without_sudo_judges_right_cleans_up_and_names_the_fix(no_sudo_server, caplog,
                                                                      monkeypatch):
    """Not root and no passwordless sudo: runs go on as the sandbox's user (right 1.0, wrong
    0), each sandbox serves one run and is deleted (the proof that nothing of the run is
    left), and one warning says what is lost and how to get it back."""
    import deepgym_ray.sandboxes.remote as provider_module

    server = no_sudo_server
    monkeypatch.setattr(provider_module, "_WARNED", set())  # whatever an earlier test logged
    with _judging(server) as (client, provider):
        with caplog.at_level(logging.WARNING, logger="deepgym_ray.sandboxes"):
            leaked = client.run_safe(ENV, LEAKER)
            wrong = client.run(ENV, WRONG)
            right = client.run(ENV, ENV.reference_solution)
        assert leaked.has_verdict and not leaked.passed, leaked
        assert wrong.has_verdict and wrong.score == 0.0 and right.score == 1.0, (wrong, right)
        made = provider.made
        assert all(not s.handle.remote.as_root and s.handle.uid is None for s in made)
        ids = [s.handle.remote.id for s in made]
        assert len(set(ids)) == 3  # never reused: nothing tells its run's processes apart
        deleted = {provider.deleted.get(timeout=120) for _ in ids}
        assert deleted == set(ids) and not set(ids) & set(server.live_sandboxes())
        # The leaker's child went with its sandbox (killed with it: given time to end).
        deadline = time.monotonic() + 60
        while _processes_of(server.sandbox_user.uid):
            assert time.monotonic() < deadline, _processes_of(server.sandbox_user.uid)
            time.sleep(0.1)
        user_warnings = [r.getMessage() for r in caplog.records if "not root" in r.getMessage()
                         and "sudo" in r.getMessage()]
        assert len(user_warnings) == 1, user_warnings  # once, not once per sandbox
        for words in ("'daytona'", "a password is required", "can read the verifier",
                      "whose user is root", "passwordless sudo"):
            assert words in user_warnings[0]
        confinement = [r.getMessage() for r in caplog.records
                       if "confinement is weaker" in r.getMessage()]
        assert len(confinement) == 1 and "tmpfs work area" in confinement[0]


def test_the_root_probe_reads_what_the_sandbox_said():
    from deepgym_ray.sandboxes.remote.privilege import probe_command, read_probe

    said = 'deepgym-root {"euid": 1000, "python": "/opt/py/bin/python3", "path": "/opt/py/bin",'
    sudo = read_probe(said + ' "sudo": "ok"}\n')
    assert sudo.via == "sudo" and sudo.runner_path == "/opt/py/bin"
    assert sudo.program_prefix() == ["sudo", "-n", "/opt/py/bin/python3"]
    missing = read_probe("noise\n" + said + ' "sudo": "sudo is not installed"}')
    assert not missing.as_root and missing.why_not == "sudo is not installed"
    assert missing.program_prefix() == ["python3"] and missing.runner_path is None
    root = read_probe('deepgym-root {"euid": 0, "python": "/usr/bin/python3", "path": "/b"}')
    assert root.via == "user" and root.runner_path is None
    with pytest.raises(ValueError, match="no report"):
        read_probe("bash: python3: command not found")
    assert probe_command().startswith("python3 -I -S -B -c ") and "sudo" in probe_command()


def test_the_warning_names_each_missing_confinement():
    from deepgym_ray.sandboxes.remote.command import missing_confinement

    words = " ".join(missing_confinement({"missing": {"namespaces": "EPERM", "work_area": "x",
                                                      "cgroups": "read-only"}}))
    for what in ("toolbox daemon", "tmpfs work area", "per-run cgroups", "EPERM", "read-only"):
        assert what in words


def test_a_sandbox_never_serves_a_run_less_confined_than_its_first(daytona_server):
    """What the first run could apply is required of every later run in that sandbox: one
    that cannot is not judged (and the sandbox is deleted), never run weaker in silence."""
    server = daytona_server
    with _judging(server) as (client, provider):
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        first = provider.made[0]
        box = server.boxes[first.handle.remote.id]
        probe = _inside(server, first, f"{box.home}/deepgym/judge/.deepgym-confinement.json")
        assert '"namespaces": true' in probe.read_text()
        box.container.privileged = False  # the sandbox's commands lose CAP_SYS_ADMIN
        with pytest.raises(SandboxError, match="held before"):
            client.run(ENV, ENV.reference_solution)
        assert first.handle.remote.id not in provider.live_sandboxes()


def test_a_sandbox_whose_sudo_stops_working_serves_no_weaker_run(daytona_server):
    """Runs in a sandbox whose user became root through sudo keep asking for it: once sudo
    asks for a password, a run gets no verdict (and its sandbox is deleted), never a run as
    the sandbox's user in its stead."""
    server = daytona_server
    with _judging(server) as (client, provider):
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        remote = provider.made[0].handle.remote
        rule = "daytona ALL=(ALL:ALL) ALL"  # (rewritten in place: it is a bind mount)
        remote.sdk.process.exec(f"sudo -n sh -c \"grep -v NOPASSWD /etc/sudoers > /tmp/s && "
                                f"echo '{rule}' >> /tmp/s && cat /tmp/s > /etc/sudoers\"")
        with pytest.raises(SandboxError, match="a password is required"):
            client.run(ENV, ENV.reference_solution)
        assert remote.id not in provider.live_sandboxes()


def _processes_of(uid):
    """Live processes of ``uid``. A zombie is dead (it runs nothing and holds nothing but its
    pid); an orphan's waits for this machine's init, which reaps lazily, to collect it."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").split()[:1] != ["Z"] \
                and fields.get("Uid", "").split()[:1] == [str(uid)]:
            found.append(entry)
    return found
