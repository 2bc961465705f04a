"""A case's CPU read from the solution's own cgroup (``deepgym_cgroup.CpuGroup``): every process
it started counts, reaped or not, and killing it empties the group, orphans included; through
the providers, a grandchild that outlives a timed-out call is gone before the next call, and
CPU burnt between calls is charged to the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from deepgym_ray.models import Environment
from deepgym_ray.sandboxes.local.cgroups import ROOT, RunCgroups, _v2_parent

JUDGE = Path(__file__).parents[2] / "deepgym_ray" / "judge"
sys.path.insert(0, str(JUDGE))
from deepgym_cgroup import CpuGroup  # noqa: E402 - stdlib-only judge file
from deepgym_clock import CpuClock  # noqa: E402 - stdlib-only judge file
from deepgym_zyproc import join_cgroups  # noqa: E402

BURN = 0.6  # CPU seconds the orphaned grandchild spends before it reports

# Double-forks; the grandchild (its own session, reaped by nobody here) burns BURN s of CPU,
# reports its pid and CPU on stdout, and then waits forever; the middle process is reaped.
ORPHAN_MAKER = f'''
import os, sys, time
r, w = os.pipe()
child = os.fork()
if child == 0:
    if os.fork() != 0:
        os._exit(0)
    os.setsid()
    start = time.process_time()
    while time.process_time() - start < {BURN}:
        pass
    os.write(w, b"%d %.3f" % (os.getpid(), time.process_time() - start))
    while True:
        time.sleep(60)
os.close(w)
os.waitpid(child, 0)
sys.stdout.write(os.read(r, 64).decode() + "\\n")
sys.stdout.flush()
sys.stdin.read()
'''


@pytest.fixture
def run_group():
    """A run's cgroups, as the local provider makes them (needs root and cgroup v1 cpuacct)."""
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    groups = RunCgroups.probe()
    if not groups.has("cpuacct"):
        pytest.skip(f"no cpuacct cgroup here: {groups.missing}")
    run = groups.create(f"test-{uuid.uuid4().hex[:8]}", memory_bytes=1 << 30, pids=64)
    yield run
    run.kill_all()
    assert run.remove()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _start_in(files: list[str]) -> tuple[subprocess.Popen, int, float]:
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN_MAKER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, preexec_fn=lambda: join_cgroups(os.getpid(),
                                                                                    files))
    pid, burnt = proc.stdout.readline().split()
    return proc, int(pid), float(burnt)


def test_the_solutions_group_counts_an_orphaned_grandchild_and_kills_it(run_group):
    files, group = CpuGroup.split(run_group.procs_files())
    assert group is not None and group.procs in files
    assert str(Path(group.path).parent) in {str(g) for g in run_group.groups.values()}
    # Root's, like the run's groups: a solution (another uid) can neither leave nor rewrite it.
    info = os.stat(group.procs)
    assert info.st_uid == 0 and not info.st_mode & 0o022
    proc, orphan, burnt = _start_in(files)
    try:
        assert burnt >= BURN and _alive(orphan)
        assert orphan in group.members() and orphan in run_group.pids()
        by_group, by_proc = CpuClock(proc.pid, group), CpuClock(proc.pid)
        # The group sees the grandchild's CPU; /proc (the fallback) sees only the process and
        # its reaped child, which is what the fallback documents it loses.
        assert by_group.read() >= burnt
        assert by_proc.read() < burnt / 2
        by_group.close()
        by_proc.close()
        assert group.kill()
        assert not _alive(orphan) and not group.members()
        proc.wait(10)
    finally:
        proc.kill()
        proc.wait()
    group.remove()
    assert not os.path.exists(group.path)


def test_the_run_kills_and_removes_per_process_groups_left_behind(run_group):
    files, group = CpuGroup.split(run_group.procs_files())
    proc, orphan, _ = _start_in(files)
    try:
        assert orphan in run_group.pids()
        assert run_group.kill_all()  # the provider's cleanup, with the group still there
        assert not _alive(orphan)
    finally:
        proc.kill()
        proc.wait()
    assert run_group.remove()
    assert not os.path.exists(group.path)


def test_a_cgroup_v2_group_counts_and_kills_the_same_way():
    """Where v1 has no cpuacct the provider's run group is made in the v2 hierarchy (here the
    hybrid's ``unified`` one): the same split, count, kill and removal."""
    parent = _v2_parent(ROOT) if os.geteuid() == 0 else None
    if parent is None or not (parent / "cpu.stat").is_file():
        pytest.skip("no writable cgroup v2 hierarchy here")
    groups = RunCgroups({"cpuacct": parent}, {})
    try:
        run = groups.create(f"test-{uuid.uuid4().hex[:8]}", memory_bytes=1 << 30, pids=64)
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup v2 group: {exc}")
    try:
        files, group = CpuGroup.split(run.procs_files())
        assert group is not None and Path(group.path).parent == run.groups["cpuacct"]
        proc, orphan, burnt = _start_in(files)
        try:
            clock = CpuClock(proc.pid, group)
            assert clock.v2 and clock.read() >= burnt
            clock.close()
            assert orphan in run.pids()
            assert group.kill()  # cgroup.kill, then the members are checked
            assert not _alive(orphan)
        finally:
            proc.kill()
            proc.wait()
    finally:
        assert run.kill_all()
        assert run.remove()  # with the per-process group below it
    assert not os.path.exists(group.path)


# Through a provider: the first call leaves an orphaned grandchild (its own session) that burns
# CPU and then blocks; once that call timed out, a new solution process is asked whether the
# grandchild still lives. 1.0 only when it is gone.
ORPHAN_VERIFIER = '''
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        sol.plant()
        return {"score": 0.0, "details": "the planting call returned"}
    except TimeoutError as exc:
        first = str(exc)
    left = sol.survivor()
    return {"score": 1.0 if left == "gone" else 0.0, "details": f"{first}; {left}"}
'''

ORPHAN_SOLUTION = '''
import os, time
def plant():
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        if os.fork() != 0:
            os._exit(0)
        os.setsid()
        with open("survivor.pid", "w") as f:
            f.write(str(os.getpid()))
        os.write(w, b"x")
        while True:
            pass
    os.close(w)
    os.waitpid(child, 0)
    os.read(r, 1)
    while True:
        time.sleep(60)
def survivor():
    with open("survivor.pid") as f:
        pid = int(f.read())
    try:  # a signal, not /proc: the sandbox's /proc may hide a process that changed uid
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except OSError as exc:
        return repr(exc)
    return "alive"  # (a zombie too: nothing in a sandbox should leave one for long)
'''

# A call starts a thread that burns 3 case limits of CPU between calls (while the verifier
# waits for it to report), then a call that does nothing: it is charged that CPU.
BETWEEN_VERIFIER = '''
import os, time
from deepgym_solution import load_solution
from deepgym_spawn import solution_dir


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    sol.start()
    flag = os.path.join(solution_dir(), "burnt")
    deadline = time.monotonic() + 60
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the solution's report, not for time to pass
    if not os.path.exists(flag):
        return {"score": 0.0, "details": "the thread never reported"}
    try:
        sol.quick()
    except TimeoutError as exc:
        return {"score": 1.0, "details": str(exc)}
    return {"score": 0.0, "details": "the CPU between calls was not charged"}
'''

BETWEEN_SOLUTION = '''
import threading, time
def _burn():
    start = time.process_time()
    while time.process_time() - start < 1.5:
        pass
    open("burnt", "w").close()
def start():
    threading.Thread(target=_burn, daemon=True).start()
def quick():
    return 1
'''


def _env(name: str, verifier: str) -> Environment:
    return Environment(name=name, verifier_code=verifier, timeout=30, case_timeout=0.5)


@pytest.fixture(scope="module")
def bwrap_client():
    """A local client whose solution processes start with bwrap each (no zygote)."""
    from deepgym_ray.client import DeepGym

    client = DeepGym(mode="local", backend="threads", solution_zygote=False)
    yield client
    client.close()


@pytest.mark.parametrize("mode", ["local", "bwrap", "docker"])
def test_a_timed_out_calls_orphaned_grandchild_is_gone_before_the_next_call(mode, request):
    client = request.getfixturevalue(f"{mode}_client")
    result = client.run(_env("orphan-after-timeout", ORPHAN_VERIFIER), ORPHAN_SOLUTION)
    assert result.score == 1.0, result.details  # the call timed out, the grandchild is gone
    # Which of the call's bounds ended it depends on the machine's load: its CPU limit (the
    # grandchild's CPU is counted) on a quiet machine, or with every core kept busy its
    # wall-clock bound first (seen under scripts/stress_tests.sh: the grandchild got less than
    # a tenth of a core). That the grandchild's CPU counts is asserted where the load cannot
    # decide it: test_cpu_burnt_between_calls_is_charged_to_the_next, and
    # test_the_solutions_group_counts_an_orphaned_grandchild_and_kills_it.
    assert "the solution did not answer within" in result.details, result.details


@pytest.mark.parametrize("mode", ["local", "bwrap", "docker"])
def test_cpu_burnt_between_calls_is_charged_to_the_next(mode, request):
    client = request.getfixturevalue(f"{mode}_client")
    result = client.run(_env("cpu-between-calls", BETWEEN_VERIFIER), BETWEEN_SOLUTION)
    assert result.score == 1.0, result.details
    assert "CPU time" in result.details


# Two solution processes of one run: the first burns between calls, the second is then asked;
# what the first burnt is not the second's (its own group; in Docker, where the container is
# counted, CPU between calls is charged only while one solution process is live).
TWO_PROCESSES_VERIFIER = '''
import os, time
from deepgym_solution import load_solution
from deepgym_spawn import solution_dir


def verify(solution_path, test_cases_path=None):
    first, second = load_solution(solution_path), load_solution(solution_path)
    first.start()
    flag = os.path.join(solution_dir(), "burnt")
    deadline = time.monotonic() + 60
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the solution's report, not for time to pass
    if not os.path.exists(flag):
        return {"score": 0.0, "details": "the thread never reported"}
    try:
        return {"score": float(second.quick()), "details": "the second answered"}
    except TimeoutError as exc:
        return {"score": 0.0, "details": f"the second was charged: {exc}"}
'''


@pytest.mark.parametrize("mode", ["local", "docker"])
def test_a_second_solution_process_is_not_charged_the_firsts_cpu(mode, request):
    client = request.getfixturevalue(f"{mode}_client")
    result = client.run(_env("cpu-two-processes", TWO_PROCESSES_VERIFIER), BETWEEN_SOLUTION)
    assert result.score == 1.0, result.details
