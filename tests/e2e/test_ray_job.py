"""`ray job submit -- deepgym-ray eval ...` against a `ray start --head` cluster on 127.0.0.1.

The cluster is started here with its job server (the dashboard), the eval is submitted as a
job, and its streamed results are read back from --out. The cluster is stopped by killing the
session that `ray start --block` leads, so only the processes this test started are touched
(`ray stop` would kill every Ray process on the machine, other tests' clusters included).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TASKS = 12


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def _stop_session(proc: subprocess.Popen) -> None:
    """SIGTERM the session `ray start` leads, then SIGKILL whatever of it is left."""
    sid = proc.pid
    try:
        os.killpg(sid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    # Some of the session's processes never leave on SIGTERM (the teardown always ran to a
    # 20 s deadline): a few seconds for the rest to go their own way, then SIGKILL.
    deadline = time.monotonic() + 5
    while _session_members(sid) and time.monotonic() < deadline:
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
    for pid in _session_members(sid):  # Ray workers lead their own groups, not sessions
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


@pytest.fixture
def ray_head():
    """A `ray start --head` cluster on 127.0.0.1 with its job server; yields (url, env)."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip("the ray command is not installed")
    pytest.importorskip("aiohttp", reason="job submission needs ray[default]")
    temp_dir = tempfile.mkdtemp(prefix="dgrj-", dir="/tmp")  # short: Ray puts sockets in it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        PATH=f"{ray_bin.parent}{os.pathsep}{env.get('PATH', '')}",
        RAY_USAGE_STATS_ENABLED="0",
        # Ray enables token auth for local clusters; give the cluster and the client one token.
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),
        # Keep 127.0.0.1 as the node address (Ray otherwise swaps it for the routable one).
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
    )
    dashboard, gcs = _free_port(), _free_port()
    command = [
        str(ray_bin), "start", "--head", "--block",
        "--node-ip-address", "127.0.0.1", "--port", str(gcs),
        "--include-dashboard=true", "--dashboard-host", "127.0.0.1",
        "--dashboard-port", str(dashboard),
        "--dashboard-agent-listen-port", str(_free_port()),
        "--ray-client-server-port", str(_free_port()),
        "--num-cpus", "2", "--temp-dir", temp_dir, "--disable-usage-stats",
    ]
    log = open(Path(temp_dir) / "ray-start.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=temp_dir)
    url = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (Path(temp_dir) / "ray-start.log").read_text()
            probe = subprocess.run([str(ray_bin), "job", "list", "--address", url], env=env,
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode == 0:
                break
            assert time.monotonic() < deadline, probe.stdout + probe.stderr
            time.sleep(1)
        yield url, env, f"127.0.0.1:{gcs}"
    finally:
        _stop_session(proc)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _ray_job(url: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    ray_bin = str(Path(sys.executable).with_name("ray"))
    command, *rest = args
    return subprocess.run([ray_bin, "job", command, "--address", url, *rest], env=env,
                          capture_output=True, text=True, timeout=120)


def _wait_for_job(url: str, env: dict, job_id: str, seconds: float = 900) -> str:
    """The job's final status line, asked for every second: short requests instead of one
    long-lived log stream, which a job server on a busy machine was seen to drop
    (ServerDisconnectedError) while the job itself ran on."""
    deadline = time.monotonic() + seconds
    while True:
        status = _ray_job(url, env, "status", job_id)
        said = status.stdout + status.stderr
        if status.returncode == 0 and any(word in said for word in
                                          ("succeeded", "failed", "stopped")):
            return said
        assert time.monotonic() < deadline, said
        time.sleep(1)


def test_eval_as_a_ray_job(ray_head, tmp_path):
    url, env, gcs = ray_head
    out_file = tmp_path / "humaneval.jsonl"
    job_id = f"deepgym-eval-{secrets.token_hex(4)}"
    # The job server answers `ray job list` before the head's job agent has registered: on a
    # busy machine a submission then got "500: No available agent to submit job, please try
    # again later"; under scripts/stress_tests.sh the server also dropped the connection
    # ("Server disconnected") once. The event waited for is a submission the server accepts;
    # the submission id makes a resubmission safe (a dropped one that went through is then
    # "already exists").
    deadline = time.monotonic() + 180
    dropped = False
    while True:
        submit = _ray_job(
            url, env, "submit", "--no-wait", "--submission-id", job_id, "--",
            "deepgym-ray", "eval", "humaneval", "--reference", "--limit", str(TASKS),
            "--config", str(ROOT / "configs" / "local.yaml"), "--max-parallel", "4",
            "--no-progress", "--out", str(out_file), "-v",
        )
        said = submit.stdout + submit.stderr
        if dropped and f"submission_id {job_id} already exists" in said:
            break  # the dropped submission had gone through
        dropped = dropped or "Server disconnected" in said
        if submit.returncode == 0 or time.monotonic() > deadline or not (
                "No available agent" in said or "Server disconnected" in said):
            assert submit.returncode == 0, said
            break
        time.sleep(1)
    status = _wait_for_job(url, env, job_id)
    job_logs = _ray_job(url, env, "logs", job_id)
    logs = status + job_logs.stdout + job_logs.stderr
    assert job_logs.returncode == 0, logs
    assert f"Job '{job_id}' succeeded" in status, logs
    # The driver joined the job's cluster instead of starting its own (said at INFO: -v).
    assert f"joining the Ray cluster at {gcs}" in logs
    assert f"Runs: {TASKS} (judged {TASKS}, no verdict 0)" in logs
    assert "Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)" in logs

    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(f"humaneval/{i}" for i in range(TASKS))
    assert all(r["passed"] and r["has_verdict"] and r["sandbox_id"] for r in records)

    # A process without the cluster's token is told how to give it (Ray itself says only
    # "Failed to connect", after its core logged InvalidAuthToken).
    home = tmp_path / "home"  # no ~/.ray/auth_token of another cluster's either
    home.mkdir()
    stranger = {k: v for k, v in env.items() if not k.startswith("RAY_AUTH")}
    stranger.update(RAY_ADDRESS=gcs, HOME=str(home))
    proc = subprocess.run(["deepgym-ray", "eval", "coin_change", "--reference", "--backend",
                           "ray", "--no-progress"], env=stranger, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode != 0, proc.stdout
    assert "RAY_AUTH_MODE=token" in proc.stderr and "auth_token" in proc.stderr, \
        proc.stderr[-3000:]
