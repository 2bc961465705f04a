"""An eval that is stopped: SIGINT and SIGTERM save and summarise what finished; SIGKILL of a
command that started its own Ray leaves no process behind, and SIGKILL of one whose answers
loop forever leaves none of theirs (on either backend); and the default picks the backend."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from deepgym_ray.pool.reaper import TAG_VARIABLE, tagged_processes
from deepgym_ray.sandboxes.local.cgroups import RunCgroups

FIRST_UID = 1 << 20  # the local provider's run uids start here (see LocalProvider.create)

pytestmark = pytest.mark.e2e


def _start_eval(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path, str]:
    out = tmp_path / "results.jsonl"
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_VARIABLE: tag, "RAY_ADDRESS": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", "builtin", "--reference",
         "--no-progress", "--max-parallel", "2", "--out", str(out), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out, tag


def _wait_for_results(proc: subprocess.Popen, out: Path, count: int) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"eval ended or stalled before {count} results: {proc.poll()}")


def _wait_gone(tag: str) -> list[int]:
    deadline = time.monotonic() + 60
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_eval_saves_and_summarises_what_finished(tmp_path, signum):
    proc, out, tag = _start_eval(tmp_path, "--backend", "threads")
    _wait_for_results(proc, out, 2)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    saved = out.read_text().splitlines()
    assert all(json.loads(line)["task_id"] for line in saved)
    assert f"interrupted after {len(saved)} of 20 runs" in stdout
    assert "Pass Rate" in stdout and "rerun the same command to resume" in stderr
    assert _wait_gone(tag) == []


def test_sigkill_of_an_eval_with_its_own_ray_leaves_no_process(tmp_path):
    proc, out, tag = _start_eval(tmp_path, "--backend", "ray")
    _wait_for_results(proc, out, 1)
    assert len(tagged_processes(tag)) > 3  # Ray's own processes, started for this command
    proc.kill()
    proc.wait(timeout=30)
    assert _wait_gone(tag) == []


def test_without_a_cluster_the_default_scores_without_ray_and_says_so(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", "coin_change", "--reference",
         "--no-progress"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "No Ray cluster is running: scoring on this machine without Ray" in done.stderr
    assert "Pass Rate: 100.00%" in done.stdout


def _sleeper_folder(tmp_path: Path) -> tuple[Path, Path]:
    """An environment folder whose runs would take ten minutes, and eight answers for it."""
    from helpers.cancel import SLEEPER, SLEEPING_SOLUTION

    folder = tmp_path / "sleeper"
    folder.mkdir()
    (folder / "task.md").write_text("Wait.\n")
    (folder / "verifier.py").write_text(SLEEPER.verifier_code)
    (folder / "metadata.json").write_text(json.dumps(
        {"name": "sleeper", "timeout": SLEEPER.timeout, "case_timeout": SLEEPER.case_timeout}))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"completion": SLEEPING_SOLUTION}) + "\n"
                               for _ in range(8)))
    return folder, answers


def test_ctrl_c_of_an_eval_on_a_running_cluster_leaves_nothing_running_on_the_pool(
        tmp_path, ray_local):
    from helpers.cancel import end_runs_of, run_processes, wait_until
    from ray.util import list_named_actors

    from deepgym_ray.pool.admin import shutdown_pools

    if os.geteuid() != 0:
        pytest.skip("the runs' solution uids, which this test watches, need root")
    folder, answers = _sleeper_folder(tmp_path)
    name = f"cli-cancel-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "RAY_ADDRESS": ray_local.get_runtime_context().gcs_address}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", str(folder), "--solutions",
         str(answers), "--mode", "local", "--pool-name", name, "--actors", "2",
         "--max-parallel", "4", "--no-progress", "--out", str(tmp_path / "out.jsonl")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    actors: list = []
    try:
        def pool_running() -> bool:
            assert proc.poll() is None, proc.communicate()
            if len(actors) < 2:  # the eval makes the pool; its actors appear one by one
                actors[:] = [ray_local.get_actor(a["name"], namespace=a["namespace"])
                             for a in list_named_actors(all_namespaces=True)
                             if a["name"].startswith(f"{name}-")]
                if len(actors) < 2:
                    return False
            pids = [s["pid"] for s in _stats(ray_local, actors)]
            return len(run_processes(pids, solutions_only=True)) >= 4

        wait_until(pool_running, "four runs of the eval running on the pool", limit=300)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        assert "interrupted after 0 of 8 runs" in stdout

        def pool_idle() -> bool:
            stats = _stats(ray_local, actors)
            return (all(s["in_flight"] == 0 and s["leases"] == 0 for s in stats)
                    and not run_processes([s["pid"] for s in stats]))

        wait_until(pool_idle, "the interrupted eval's runs stopped on the pool")
        assert sum(s["stopped"] for s in _stats(ray_local, actors)) >= 4
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        uids = [u for s in _stats(ray_local, actors) for u in _uids_below(s["pid"])]
        shutdown_pools(name)
        end_runs_of(uids)


def _stats(ray, actors: list) -> list[dict]:
    return ray.get([actor.stats.remote() for actor in actors], timeout=60)


def _uids_below(actor_pid: int) -> list[int]:
    """The run uids of the solution processes below an actor now."""
    from helpers.cancel import run_processes

    uids = []
    for pid in run_processes([actor_pid], solutions_only=True):
        try:
            with open(f"/proc/{pid}/status") as f:
                uids += [int(line.split()[1]) for line in f if line.startswith("Uid:")]
        except OSError:
            continue
    return uids


# --- SIGKILL of the driver with answers that never return -------------------------------------

SPINNER_VERIFIER = ("from deepgym_solution import load_solution\n"
                    "def verify(solution_path, test_cases_path=None):\n"
                    "    load_solution(solution_path).spin()\n"
                    "    return 1.0\n")
SPINNING_SOLUTION = "def spin():\n    while True:\n        pass\n"
MOUNT = re.compile(r"/deepgym-(?:run|sol)-(\d+)-")


def _spinner_folder(tmp_path: Path) -> tuple[Path, Path]:
    """An environment whose answers loop forever (ten minutes of CPU each allowed), and eight
    answers for it."""
    folder = tmp_path / "spinner"
    folder.mkdir()
    (folder / "task.md").write_text("Spin.\n")
    (folder / "verifier.py").write_text(SPINNER_VERIFIER)
    (folder / "metadata.json").write_text(json.dumps(
        {"name": "spinner", "timeout": 600, "case_timeout": 600}))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"completion": SPINNING_SOLUTION}) + "\n"
                               for _ in range(8)))
    return folder, answers


class _Census:
    """Every process below the driver seen so far (pid -> start time), and the run uids among
    them; what of it, or of what it made (cgroups, mounts, janitors), is still there."""

    def __init__(self, driver: int) -> None:
        self.driver, self.seen, self.uids = driver, {driver: _stat(driver)[1]}, set()
        self.cgroup_parents = set(RunCgroups.probe().parents.values())  # the driver's too

    def look(self) -> int:
        """Add the driver's descendants now; how many run-uid processes burn CPU."""
        table = {pid: _stat(pid) for pid in _pids()}
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_rest) in table.items():
            children.setdefault(ppid, []).append(pid)
        stack, spinning = [self.driver], 0
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in self.seen:
                    self.seen[child] = table[child][1]
                stack.append(child)
                _ppid, _start, uid, ticks, _state = table[child]
                if uid >= FIRST_UID:
                    self.uids.add(uid)
                    spinning += ticks > 0
        return spinning

    def leftovers(self) -> list[str]:
        """What is left of the eval: live processes (zombies, already dead, aside), janitors
        of its processes, cgroups and mounts named after them."""
        left = []
        for pid in _pids():
            _ppid, start, uid, _ticks, state = _stat(pid)
            if state == "Z":
                continue
            mine = self.seen.get(pid) == start or uid in self.uids or _janitor_of(pid) in self.seen
            if mine:
                left.append(f"process {pid} (uid {uid}): {_command(pid)}")
        for parent in self.cgroup_parents:
            for group in parent.glob("deepgym-*-*"):
                if group.name.split("-")[1] in map(str, self.seen):
                    left.append(f"cgroup {group}")
        with open("/proc/self/mountinfo") as table:
            for line in table:
                match = MOUNT.search(line.split(" ")[4])
                if match and int(match[1]) in self.seen:
                    left.append(f"mount {line.split(' ')[4]}")
        return left


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> tuple[int, int, int, int, str]:
    """(parent pid, start time, real uid, CPU ticks, state) of ``pid``; zeros when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return 0, 0, -1, 0, "X"
    return int(fields[1]), int(fields[19]), uid, int(fields[11]) + int(fields[12]), fields[0]


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(f.read().decode(errors="replace").split())[:160]
    except OSError:
        return "?"


def _janitor_of(pid: int) -> int:
    """The pid whose janitor ``pid`` is (its command line names it), or 0."""
    args = _command(pid).split()
    if len(args) >= 3 and args[-3].endswith("deepgym_janitor.py") and args[-1].isdigit():
        return int(args[-1])
    return 0


@pytest.mark.parametrize("backend", ["threads", "ray"])
def test_sigkill_of_an_eval_leaves_none_of_its_processes(tmp_path, backend):
    # SIGKILL runs no clean-up of the driver's: the solutions must die with it all the same
    # (the janitor kills the runs' cgroups; the reaper, Ray's processes and agents).
    from helpers.cancel import wait_until

    if os.geteuid() != 0:
        pytest.skip("the runs' solution uids and cgroups, which this test watches, need root")
    folder, answers = _spinner_folder(tmp_path)
    env = {**os.environ, TAG_VARIABLE: uuid.uuid4().hex, "RAY_ADDRESS": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym_ray.cli", "eval", str(folder), "--solutions",
         str(answers), "--mode", "local", "--backend", backend, "--max-parallel", "8",
         "--no-progress", "--out", str(tmp_path / "out.jsonl")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    census = _Census(proc.pid)
    try:
        def spinning() -> bool:
            assert proc.poll() is None, proc.communicate()[1]
            return census.look() >= 4

        wait_until(spinning, "four answers looping in their sandboxes", limit=300)
        census.look()
        proc.kill()
        proc.wait(30)
        left = census.leftovers()
        deadline = time.monotonic() + 30  # a guard against a hang, not a measure of speed
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = census.leftovers()
        assert left == [], "\n".join(left)
        assert tagged_processes(env[TAG_VARIABLE]) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
