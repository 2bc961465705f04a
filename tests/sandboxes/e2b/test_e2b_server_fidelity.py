"""The local E2B server (tests/e2b_server) behaves as E2B does where a provider depends on it,
checked with the real ``e2b`` SDK: a sandbox from the control plane, commands streamed through
the daemon's Connect service as ``user`` or ``root``, files written and read, a lifetime that
ends the sandbox, the key and the sandbox's access token checked (issue 39)."""

from __future__ import annotations

import time

import pytest

e2b = pytest.importorskip("e2b")


@pytest.fixture
def sdk(e2b_server, monkeypatch):
    for name, value in e2b_server.environ().items():
        monkeypatch.setenv(name, value)
    e2b_server.faults.clear()
    return e2b_server


def test_commands_run_as_the_templates_user_or_root_with_their_output_and_exit_code(sdk):
    box = e2b.Sandbox.create(timeout=120, allow_internet_access=False)
    try:
        ran = box.commands.run("id -un; pwd; echo to-stderr >&2")
        assert (ran.stdout, ran.stderr, ran.exit_code) == ("user\n/home/user\n",
                                                          "to-stderr\n", 0)
        assert box.commands.run("id -un", user="root").stdout == "root\n"
        with pytest.raises(e2b.CommandExitException) as failed:
            box.commands.run("echo partial; exit 3")
        assert failed.value.exit_code == 3 and failed.value.stdout == "partial\n"
        streamed: list[str] = []
        box.commands.run("for i in 1 2 3; do echo $i; sleep 0.05; done",
                         on_stdout=streamed.append)
        assert "".join(streamed) == "1\n2\n3\n"
        with pytest.raises(e2b.TimeoutException):  # its timeout ends the command too
            box.commands.run("sleep 30", timeout=1)
        deadline = time.monotonic() + 60
        while "sleep 30" in box.commands.run("ps -eo args").stdout:
            assert time.monotonic() < deadline, "the timed-out command still runs"
            time.sleep(0.1)
        # ... but a caller that goes away does not: the command goes on (as envd's do).
        handle = box.commands.run("sleep 0.5; echo done > left.txt", background=True)
        handle.disconnect()
        while box.commands.run("cat left.txt 2>/dev/null || true").stdout != "done\n":
            assert time.monotonic() < deadline, "the disconnected command was ended"
            time.sleep(0.1)
        offline = box.commands.run("python3 -c 'import socket; socket.create_connection("
                                   "(\"1.1.1.1\", 53), timeout=2)' || echo offline")
        assert offline.stdout.strip().endswith("offline")
    finally:
        box.kill()


def test_files_are_written_as_the_user_and_read_back(sdk):
    box = e2b.Sandbox.create(timeout=120)
    try:
        box.files.write("dir/notes.txt", "hello")
        box.files.write_files([{"path": "/tmp/raw.bin", "data": b"\x00\xff"},
                               {"path": "two.txt", "data": "2"}])
        assert box.files.read("dir/notes.txt") == "hello"
        assert box.files.read("/tmp/raw.bin", format="bytes") == b"\x00\xff"
        owners = box.commands.run("stat -c '%U %n' dir/notes.txt two.txt /tmp/raw.bin")
        assert owners.stdout.split("\n")[:3] == ["user dir/notes.txt", "user two.txt",
                                                 "user /tmp/raw.bin"]
        with pytest.raises(e2b.SandboxException):  # not the user's to write
            box.files.write("/etc/not-yours", "x")
        box.files.write("/etc/roots", "r", user="root")
        assert box.files.read("/etc/roots", user="root") == "r"
    finally:
        box.kill()


def test_a_sandbox_ends_at_its_lifetime_and_is_gone(sdk):
    # Created with time to spare (a loaded machine took over 2 s to answer the create), then
    # given 2 s more to live.
    box = e2b.Sandbox.create(timeout=60)
    assert box.is_running()
    box.set_timeout(2)
    deadline = time.monotonic() + 60
    while box.sandbox_id in sdk.live_sandboxes():
        assert time.monotonic() < deadline, "the sandbox outlived its lifetime"
        time.sleep(0.1)
    with pytest.raises(e2b.SandboxException):
        box.commands.run("true")
    assert not box.is_running()


def test_the_key_and_the_access_token_are_checked(sdk, monkeypatch):
    monkeypatch.setenv("E2B_API_KEY", "wrong")
    with pytest.raises(e2b.AuthenticationException):
        e2b.Sandbox.create(timeout=30)
    monkeypatch.setenv("E2B_API_KEY", sdk.api_key)
    box = e2b.Sandbox.create(timeout=60)
    try:
        import httpx

        forged = httpx.get(f"{sdk.sandbox_url}/files", params={"path": "/etc/hostname"},
                           headers={"E2b-Sandbox-Id": box.sandbox_id,
                                    "X-Access-Token": "forged"})
        assert forged.status_code == 401
    finally:
        box.kill()
