"""ForkedRun.collect: one thread waits for the runner's exit and reads its stdout and stderr.

The fork server's side of the report socket is played by the test (it speaks the server's line
protocol: ``exit <code>`` once the runner ended, and the same after a ``kill``), so each case
can hold the pipes and the report exactly as a misbehaving run would.
"""

from __future__ import annotations

import os
import socket
import threading

import pytest

from deepgym_ray.sandboxes.local import forkserver
from deepgym_ray.sandboxes.local.forkserver import ForkedRun


@pytest.fixture
def wires():
    report, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    run = ForkedRun(os.getpid() + 10_000_000, report)  # a pid no process has: kill is a no-op
    yield run, server, (out_r, out_w), (err_r, err_w)
    for fd in (out_r, out_w, err_r, err_w):
        try:
            os.close(fd)
        except OSError:
            pass
    report.close()
    server.close()


def _answer_kills(server: socket.socket) -> threading.Thread:
    """Answer the host's ``kill`` as the server does: the run's group is gone, ``exit -9``."""

    def serve() -> None:
        if server.recv(64).startswith(b"kill"):
            server.sendall(b"exit -9\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_output_and_exit_code_are_collected(wires):
    run, server, (out_r, out_w), (err_r, err_w) = wires
    os.write(out_w, b"verdict line\n")
    os.write(err_w, b"a warning\n")
    os.close(out_w)
    os.close(err_w)
    server.sendall(b"exit 3\n")
    timed_out, out, err = run.collect((out_r, err_r), (1 << 20, 1 << 20), timeout=30)
    assert (timed_out, out, err, run.returncode) == (False, b"verdict line\n", b"a warning\n", 3)


def test_output_beyond_the_limit_is_dropped_but_read_to_the_end(wires):
    run, server, (out_r, out_w), (err_r, err_w) = wires

    def flood() -> None:  # far more than a pipe holds: collect must keep reading past its limit
        for _ in range(64):
            os.write(out_w, b"x" * 65536)
        os.close(out_w)
        server.sendall(b"exit 0\n")

    writer = threading.Thread(target=flood)
    writer.start()
    os.close(err_w)
    timed_out, out, err = run.collect((out_r, err_r), (1000, 1000), timeout=30)
    writer.join(30)
    assert not writer.is_alive()
    assert (timed_out, len(out), err, run.returncode) == (False, 1000, b"", 0)


def test_at_the_deadline_the_run_is_killed_and_what_it_wrote_is_kept(wires):
    run, server, (out_r, out_w), (err_r, err_w) = wires
    os.write(out_w, b"partial")
    killer = _answer_kills(server)
    os.close(out_w)
    os.close(err_w)
    timed_out, out, _ = run.collect((out_r, err_r), (1 << 20, 1 << 20), timeout=0.2)
    killer.join(10)
    assert (timed_out, out, run.returncode) == (True, b"partial", -9)


def test_a_given_up_run_is_killed_at_once(wires):
    run, server, (out_r, out_w), (err_r, err_w) = wires
    wake_r, wake_w = os.pipe()
    try:
        os.write(wake_w, b"!")  # the caller gave up before the runner said anything
        killer = _answer_kills(server)
        os.close(out_w)
        os.close(err_w)
        timed_out, _, _ = run.collect((out_r, err_r), (1 << 20, 1 << 20), timeout=300,
                                      wake=wake_r)
        killer.join(10)
        assert timed_out and run.returncode == -9
    finally:
        os.close(wake_r)
        os.close(wake_w)


def test_a_pipe_held_open_after_the_exit_stops_the_wait_after_the_drain_time(wires, monkeypatch):
    monkeypatch.setattr(forkserver, "DRAIN_WAIT", 0.3)
    run, server, (out_r, out_w), (err_r, err_w) = wires
    os.write(out_w, b"said before exiting")  # out_w stays open: a child left holding stdout
    os.close(err_w)
    server.sendall(b"exit 0\n")
    timed_out, out, _ = run.collect((out_r, err_r), (1 << 20, 1 << 20), timeout=300)
    assert (timed_out, out, run.returncode) == (False, b"said before exiting", 0)


def test_a_server_gone_mid_run_is_a_lost_run(wires):
    run, server, (out_r, out_w), (err_r, err_w) = wires
    os.close(out_w)
    os.close(err_w)
    server.close()  # no report will ever come
    timed_out, _, _ = run.collect((out_r, err_r), (1 << 20, 1 << 20), timeout=300)
    assert not timed_out and run.lost
