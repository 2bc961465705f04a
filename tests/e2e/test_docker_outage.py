"""Outages in the middle of a docker-mode batch, through the Ray pool on a real engine.

Each run of the batch is gated: its solution starts a marked sleeper process in the container
and waits for it. The test sees the sleepers in the host's process table (a container's
processes are the host's too), so it knows when the runs are in play; it then breaks something
(stops the engine, removes a container), and opens the gates by killing the sleepers it sees.
Every input must get exactly one result, none of the runs the outage hit may be a judged 0, and
the pool must score again once the engine is back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
from helpers.docker_engine import docker_skip_reason, make_docker_client, shutdown_pool

from deepgym_ray.models import Environment
from deepgym_ray.suites import load_environment

MARK = "DGGATE" + uuid.uuid4().hex[:12]
GATE_VERIFIER = '''
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    got = load_solution(solution_path).answer()
    return {"score": 1.0 if got == 42 else 0.0, "details": repr(got)}
'''
GATED = f'''
import subprocess, sys
def answer():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(900)", "{MARK}"])
    return 42
'''
GATE_ENV = Environment(name="gate", verifier_code=GATE_VERIFIER, timeout=600, case_timeout=600)
SLOTS = 4  # 2 actors x 2 runs
WAIT = 300.0  # a bound on every wait for an event (never a timing assumption)


def wait_for(predicate, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def sleepers() -> list[int]:
    """Host pids of the gated runs' sleepers."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if MARK.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


class GateOpener(threading.Thread):
    """Kills every sleeper it sees (each gated run then answers) until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.05):
            for pid in sleepers():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def dockerd() -> tuple[int, list[str]] | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() != "dockerd":
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    return int(entry), [a.decode() for a in f.read().split(b"\0") if a]
            except OSError:
                continue
    return None


def cgroups_of(pid: int) -> list[str]:
    """The cgroup directories ``pid`` is in: one per v1 hierarchy, and the v2 one."""
    paths = []
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f.read().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers:  # v1: mounted at /sys/fs/cgroup/<controllers>
                roots = [f"/sys/fs/cgroup/{controllers.removeprefix('name=')}"]
            else:  # v2: alone at /sys/fs/cgroup, or beside v1 at /sys/fs/cgroup/unified
                roots = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            paths += [f"{root}{path}" for root in roots
                      if os.path.exists(f"{root}{path}/cgroup.procs")][:1]
    return paths


def environment_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [entry.split(b"=", 1) for entry in f.read().split(b"\0") if b"=" in entry]
    return {key.decode(): value.decode() for key, value in pairs}


def engine_environment() -> dict[str, str] | None:
    found = dockerd()
    try:
        return None if found is None else environment_of(found[0])
    except OSError:  # gone meanwhile
        return None


def restart_engine(argv: list[str], groups: list[str], environment: dict[str, str]) -> None:
    """Start the engine again as it ran before: its environment, its cgroups, a session of its
    own, and not as a child of this test process (``setsid -f`` forks, and its parent exits).
    Nothing of the test process may stick to it: a command run in process earlier (``eval``
    starts its reaper) leaves a reaper tag in this process's environment, and the reaper kills
    whatever carries the tag when this process ends."""
    def join_groups() -> None:
        for group in groups:
            try:
                with open(f"{group}/cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass  # a hierarchy we may not write: the engine stays in the test's group

    with open("/var/log/deepgym-dockerd.log", "ab") as log:
        subprocess.run(["setsid", "-f", *argv], stdout=log, stderr=log, env=environment,
                       stdin=subprocess.DEVNULL, preexec_fn=join_groups, check=True)


def engine_answers() -> bool:
    import docker

    try:
        return bool(docker.from_env(timeout=5).ping())
    except Exception:  # noqa: BLE001 - not up yet
        return False


@pytest.fixture
def gated_batch(ray_local):
    """Starts a gated batch of 2*SLOTS runs on a fresh docker pool; yields (client, thread,
    box) where box["results"] fills in when the batch is done."""
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    client = make_docker_client(actors=2, concurrency=2, max_retries=2)
    box: dict = {}

    def run():
        box["results"] = client.run_batch(GATE_ENV, [GATED] * (2 * SLOTS)).results

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    opener = GateOpener()
    try:
        wait_for(lambda: len(sleepers()) >= SLOTS, f"{SLOTS} gated runs in play")
        yield client, thread, box, opener
    finally:
        opener.start() if not opener.is_alive() else None
        thread.join(WAIT)
        opener.stop.set()
        shutdown_pool(client)
        client.close()


def assert_one_result_each_and_no_judged_zero(box):
    results = box.get("results")
    assert results is not None and len(results) == 2 * SLOTS, results
    for result in results:
        assert result.score == 1.0 or not result.has_verdict, result
    return results


def assert_pool_scores_again(client):
    env = load_environment("coin_change")
    batch = client.run_batch(env, [env.reference_solution] * SLOTS)
    assert [r.score for r in batch.results] == [1.0] * SLOTS, batch.results


def test_stopping_the_engine_mid_batch(gated_batch):
    client, thread, box, opener = gated_batch
    found = dockerd()
    if found is None or os.geteuid() != 0:
        pytest.skip("stopping the engine needs root and a dockerd process on this machine")
    pid, argv = found
    groups, environment = cgroups_of(pid), environment_of(pid)
    hit = _names_of_containers_in_play()
    assert len(hit) == SLOTS, hit
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), "dockerd to stop")
    assert not engine_answers()
    opener.start()
    restart_engine(argv, groups, environment)
    wait_for(engine_answers, "dockerd to answer again")
    wait_for(lambda: engine_environment() == environment, "the engine in its own environment")
    thread.join(WAIT)
    results = assert_one_result_each_and_no_judged_zero(box)
    # The runs the outage hit were not judged in the containers it stopped: each was retried
    # elsewhere (after the restart) or settled without a verdict.
    for result in results:
        if result.has_verdict:
            assert result.sandbox_id.split("/")[0] not in hit, result
    assert_pool_scores_again(client)


def _names_of_containers_in_play() -> set[str]:
    import docker

    api = docker.from_env(timeout=30).api
    ids = {_container_of(pid) for pid in sleepers()} - {None}
    return {api.inspect_container(cid)["Name"].lstrip("/") for cid in ids}


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _container_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        for part in line.split("/"):
            if len(part) == 64 and all(c in "0123456789abcdef" for c in part):
                return part
    return None


def test_removing_a_container_by_hand_mid_batch(gated_batch):
    import docker

    client, thread, box, opener = gated_batch
    victim = wait_for(lambda: next(filter(None, map(_container_of, sleepers())), None),
                      "the container of a gated run")
    api = docker.from_env(timeout=30).api
    name = api.inspect_container(victim)["Name"].lstrip("/")
    api.remove_container(victim, force=True)
    opener.start()
    thread.join(WAIT)
    results = assert_one_result_each_and_no_judged_zero(box)
    # The engine stayed up: the run that lost its container was retried and judged elsewhere.
    assert all(r.has_verdict and r.score == 1.0 for r in results), results
    assert not any(r.sandbox_id.startswith(name + "/") for r in results), name
    assert_pool_scores_again(client)
