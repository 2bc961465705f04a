"""``deepgym-ray serve`` on a running cluster (the session's Ray, joined by address): a second
service on another port is refused before anything is printed or deployed, and SIGTERM stops
the command cleanly, taking its application (and the Serve it started) with it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
pytest.importorskip("ray.serve")

ENTRY_POINT = Path(sys.executable).with_name("deepgym-ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


# Ray prints what the cluster's processes log (a raylet's warning about how many workers it
# started, under load) on the stdout of every driver joined to it, this command's too.
_RAY_FORWARDED = re.compile(r"^(\x1b\[[0-9;]*m)?\((raylet|pid=|\w+ pid=)")


def _ours(lines) -> list[str]:
    """The lines of a command's stdout that the command printed (not Ray's forwarded ones)."""
    return [line for line in lines if not _RAY_FORWARDED.match(line)]


def _serve_controllers(ray) -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if "SERVE_CONTROLLER" in a["name"]]


@pytest.mark.timeout(1200)
def test_serve_on_a_running_cluster_refuses_a_second_port_and_stops_cleanly(ray_local,
                                                                             tmp_path):
    assert not _serve_controllers(ray_local), "a Serve from another test is still running"
    env = {**os.environ, "RAY_ADDRESS": ray_local.get_runtime_context().gcs_address}
    first_port, other_port = _free_port(), _free_port()
    errors = open(tmp_path / "first.err", "w+")  # noqa: SIM115 - closed below
    first = subprocess.Popen([str(ENTRY_POINT), "serve", "--env", "coin_change", "--port",
                              str(first_port)], env=env, stdout=subprocess.PIPE,
                             stderr=errors, text=True)
    try:
        deadline = time.monotonic() + 600  # (a hang guard: a start under load takes minutes)
        while not _serves(first_port):
            assert first.poll() is None, Path(errors.name).read_text()[-3000:]
            assert time.monotonic() < deadline, "the first service never answered"
            time.sleep(1)
        banner = next(line for line in iter(first.stdout.readline, "") if _ours([line]))
        assert f"on http://127.0.0.1:{first_port}" in banner and "SIGTERM stops it" in banner

        second = subprocess.run([str(ENTRY_POINT), "serve", "--env", "coin_change", "--port",
                                 str(other_port)], env=env, capture_output=True, text=True,
                                timeout=300)
        assert second.returncode == 2, second.stdout + second.stderr
        assert _ours(second.stdout.splitlines()) == []  # never "serving on" a port Ray ignores
        assert f"Ray Serve already runs on this cluster on http://127.0.0.1:{first_port}" \
            in second.stderr and f"--port {first_port}" in second.stderr
        again = subprocess.run([str(ENTRY_POINT), "serve", "--env", "knapsack_01", "--port",
                                str(first_port)], env=env, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 2 and "a reward service is deployed on this cluster" \
            in again.stderr, again.stderr
        assert _serves(first_port)  # the first service was not replaced

        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=300) == 130
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        errors.seek(0)
        stderr = errors.read()
        errors.close()
    assert "Traceback" not in stderr and "deepgym-ray serve: interrupted" in stderr, stderr
    assert "/healthz" not in stderr  # no line per request (Serve's access log at INFO)
    assert not _serves(first_port)
    assert not _serve_controllers(ray_local)  # the command's own Serve went with it
