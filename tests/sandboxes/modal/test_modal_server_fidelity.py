"""The local Modal server (tests/modal_server) behaves as Modal does where a provider depends
on it, checked with the real ``modal`` client: a sandbox in an app from a registry image,
commands through the task command router as root with their output, input, variables and
exit, a command's own timeout, a lifetime that ends the sandbox (``SandboxTimeoutError``),
terminate, from_id and list, and the token and the router's JWT checked (issue 39)."""

from __future__ import annotations

import os
import time

import pytest

modal = pytest.importorskip("modal")


@pytest.fixture
def sdk(modal_server, monkeypatch):
    for name, value in modal_server.environ().items():
        monkeypatch.setenv(name, value)
    modal_server.faults.clear()
    client = modal.Client.from_credentials(modal_server.token_id, modal_server.token_secret)
    app = modal.App.lookup("fidelity", create_if_missing=True, client=client)
    return modal_server, client, app


def _create(sdk, **extra):
    server, client, app = sdk
    return modal.Sandbox.create(app=app, image=modal.Image.from_registry("python:3.11-slim"),
                                client=client, block_network=True, **extra)


def test_commands_run_as_root_with_output_input_exit_code_and_their_own_timeout(sdk):
    box = _create(sdk, timeout=120, tags={"who": "fidelity"})
    try:
        ran = box.exec("bash", "-c", "id -un; pwd; echo to-stderr >&2; exit 3", text=False)
        assert (ran.stdout.read(), ran.stderr.read(), ran.wait()) == (b"root\n/root\n",
                                                                    b"to-stderr\n", 3)
        data = os.urandom(300_000) + b"\xff\xfe not utf-8"
        fed = box.exec("bash", "-c", "cat > /tmp/in.bin; sha256sum < /tmp/in.bin", text=False)
        fed.stdin.write(data)
        fed.stdin.write_eof()
        fed.stdin.drain()
        import hashlib

        assert fed.stdout.read().split()[0].decode() == hashlib.sha256(data).hexdigest()
        assert fed.wait() == 0
        # an exec's variables (a secret source: values up to 32,768 characters), and its
        # stderr discarded when it says DEVNULL (the client then has no stream to read)
        said = box.exec("bash", "-c", 'echo "${#V}"; head -c 1000000 /dev/zero >&2',
                        env={"V": "x" * 32_768}, stderr=modal.stream_type.StreamType.DEVNULL)
        assert (said.stdout.read(), said.wait()) == ("32768\n", 0)
        with pytest.raises(modal.exception.InvalidError):
            box.exec("true", env={"V": "x" * 32_769})
        slow = box.exec("bash", "-c", "echo started; sleep 30", timeout=1)
        started = time.monotonic()
        # its timeout ends it: killed there (137), or the client's own deadline came first (-1)
        assert slow.wait() in (137, -1) and time.monotonic() - started < 20
        deadline = time.monotonic() + 60
        while "sleep 30" in box.exec("ps", "-eo", "args").stdout.read():
            assert time.monotonic() < deadline, "the timed-out command still runs"
            time.sleep(0.1)
        offline = box.exec("python3", "-c", "import socket; socket.create_connection("
                           "('1.1.1.1', 53), timeout=2)")
        assert offline.wait() != 0  # block_network
        # another handle on the same sandbox: from its id, and by its tags
        server, client, app = sdk
        again = modal.Sandbox.from_id(box.object_id, client=client)
        assert again.exec("echo", "hi").stdout.read() == "hi\n"
        listed = modal.Sandbox.list(app_id=app.app_id, tags={"who": "fidelity"}, client=client)
        assert [each.object_id for each in listed] == [box.object_id]
    finally:
        box.terminate()
    box.wait(raise_on_termination=False)
    assert box.returncode == 137
    with pytest.raises(modal.exception.NotFoundError):  # a terminated sandbox runs nothing
        box.exec("true").wait()


def test_a_sandbox_ends_at_its_lifetime(sdk):
    from modal_proto import api_pb2

    box = _create(sdk, timeout=2)
    with pytest.raises(modal.exception.SandboxTimeoutError):
        box.wait(raise_on_termination=False)
    assert box.returncode == 124 and box.object_id not in sdk[0].live_sandboxes()
    # ended by its lifetime (nothing else ends one with TIMEOUT)
    ended = sdk[0].boxes[box.object_id].result.status
    assert ended == api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT


def test_the_token_and_the_routers_token_are_checked(sdk):
    server, client, app = sdk
    wrong = modal.Client.from_credentials(server.token_id, "wrong-secret")
    with pytest.raises(modal.exception.AuthError):
        modal.App.lookup("fidelity", create_if_missing=True, client=wrong)
    box = _create(sdk, timeout=60)
    try:
        assert box.exec("true").wait() == 0
        state = server.boxes[box.object_id]
        right, state.router_jwt = state.router_jwt, "another"
        with pytest.raises(modal.exception.AuthError):  # not the sandbox's router token
            box.exec("true").wait()
        state.router_jwt = right
        assert box.exec("echo", "again").stdout.read() == "again\n"
    finally:
        box.terminate()
