"""The local Daytona server behaves as the service does where the provider depends on it
(issue 39), checked with the real ``daytona`` SDK and, for what the SDK does not show, the
raw wire: uploads go wherever the sandbox's user may write and answer per file."""

from __future__ import annotations

import pytest

pytest.importorskip("daytona")


@pytest.fixture
def sandbox(daytona_server):
    """A sandbox of the server whose user is ``daytona`` (passwordless sudo), as the
    service's default images have it, made and deleted through the SDK."""
    import daytona

    server = daytona_server
    client = daytona.Daytona(daytona.DaytonaConfig(api_key=server.api_key, api_url=server.url))
    box = client.create(daytona.CreateSandboxFromSnapshotParams(network_block_all=True))
    try:
        yield server, box
    finally:
        box.delete()


def _bulk_upload(server, box, files: dict[str, bytes]):
    import httpx

    data = {f"files[{i}].path": path for i, path in enumerate(files)}
    parts = {f"files[{i}].file": (path, content) for i, (path, content) in
             enumerate(files.items())}
    return httpx.post(f"http://{server.host}:{server.port}/toolbox/{box.id}/files/bulk-upload",
                      data=data, files=parts,
                      headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30)


def test_uploads_go_wherever_the_user_may_write_and_answer_per_file(sandbox):
    import daytona

    server, box = sandbox
    ok = _bulk_upload(server, box, {"/tmp/a.txt": b"a", "rel/dir/b.txt": b"bb"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["files"] == [{"path": "/tmp/a.txt", "bytes": 1},
                                  {"path": "rel/dir/b.txt", "bytes": 2}]

    mixed = _bulk_upload(server, box, {"/etc/deepgym-not-yours": b"x", "c.txt": b"ccc"})
    assert mixed.status_code == 400
    body = mixed.json()
    assert [e.split(":")[0] for e in body["errors"]] == ["/etc/deepgym-not-yours"]
    assert "Permission denied" in body["errors"][0]
    assert body["files"] == [{"path": "c.txt", "bytes": 3}]  # the other file was written

    # The SDK reads those per-file errors into its message.
    with pytest.raises(daytona.DaytonaError, match="/etc/nope2: Permission denied"):
        box.fs.upload_files([daytona.FileUpload(source=b"y", destination="/etc/nope2")])
    seen = box.process.exec("cat /tmp/a.txt rel/dir/b.txt c.txt; echo; stat -c '%U %a' /tmp/a.txt")
    assert seen.result.split() == ["abbccc", "daytona", "644"], seen.result


def test_exec_pipes_the_command_to_a_shell_and_a_timeout_is_408_killing_its_group(sandbox):
    import daytona

    from deepgym_ray.exceptions import ProviderTimeoutError
    from deepgym_ray.sandboxes.daytona.calls import translate

    _server, box = sandbox
    # The command is the shell's stdin: a command that reads stdin reads the script's next
    # line (with `bash -c` it would read nothing, and echo would run).
    eaten = box.process.exec("read x\necho got:$x")
    assert "got:" not in eaten.result, eaten.result
    with pytest.raises(daytona.DaytonaError) as caught:
        box.process.exec("sleep 300 & sleep 301", timeout=1)
    assert getattr(caught.value, "status_code", None) == 408
    assert isinstance(translate(caught.value, "exec"), ProviderTimeoutError)
    left = box.process.exec("ps -eo args | grep -c '^sleep 30[01]' || true")
    assert left.result.strip() == "0", left.result  # the whole process group was killed
    # The call's variables are the process's environment (never its command line, which
    # every process of the sandbox reads); its stdout and stderr come mixed, in order.
    value = "v" * 100_000
    seen = box.process.exec('echo out; echo err >&2; echo ${#K}; tr "\\0" " " '
                            '</proc/$$/cmdline | grep -c vvvv', env={"K": value})
    assert seen.result.split() == ["out", "err", "100000", "0"], seen.result[:200]
    with pytest.raises(daytona.DaytonaError) as refused:
        box.process.exec("true", env={"NOT-A-NAME": "x"})
    assert getattr(refused.value, "status_code", None) == 400


def test_stopping_the_server_removes_every_cgroup_its_sandboxes_made():
    """A run killed with its sandbox leaves the groups it made inside; they are below the
    sandbox's own in every hierarchy, and the server removes them all when it stops."""
    import os
    import threading
    from pathlib import Path

    from daytona_server import DaytonaTestServer
    from helpers.remote_setup import ENV, options

    from deepgym_ray.client import DeepGym

    server = DaytonaTestServer().start()
    if not server.contain:
        server.stop()
        pytest.skip("the test server's sandboxes are not containers here (not root)")
    client = DeepGym(mode="daytona", backend="threads", **options(server, call_timeout=5.0))
    sleeper = "import time\ntime.sleep(600)\n" + ENV.reference_solution
    runner = threading.Thread(target=client.run_safe, args=(ENV, sleeper), daemon=True)
    runner.start()
    groups: list[Path] = []
    try:
        while not any(g.name.startswith("deepgym-remote-") for g in groups):
            assert runner.is_alive(), "the run ended before its cgroups were seen"
            with server.lock:
                tops = [g for box in server.boxes.values() if box.container
                        for g in box.container.groups.values()]
            # os.walk, not rglob: a group may vanish mid-walk, and os.walk skips it quietly
            groups = [Path(root, d) for top in tops for root, dirs, _ in os.walk(top)
                      for d in dirs]
            runner.join(0.05)
        made = groups + tops
    finally:
        server.stop()
        client.close()
    runner.join(60)
    # the exact paths seen, not a scan of the host's hierarchies: other workers' servers make
    # and remove their own groups meanwhile, and a scan races them
    left = [p for p in made if p.exists()]
    assert left == []


@pytest.fixture
def fast_server():
    """A server of the test's own whose minute of auto-stop and auto-delete lasts 0.2 s (a
    test may lengthen it while it must not fire: under load, the gaps between one run's calls
    can be longer than that)."""
    from daytona_server import DaytonaTestServer

    server = DaytonaTestServer(minute=0.2).start()
    try:
        yield server
    finally:
        server.stop()


def _state(server, sid: str) -> str:
    with server.lock:
        box = server.boxes.get(sid)
    return "destroyed" if box is None else box.state.value


def _wait_for_state(server, sid: str, state: str) -> None:
    import time

    deadline = time.monotonic() + 120
    while _state(server, sid) != state:
        assert time.monotonic() < deadline, f"{sid} never became {state}: {_state(server, sid)}"
        time.sleep(0.05)


def test_a_stop_ends_the_processes_and_keeps_the_files_and_idle_ones_stop_then_go(fast_server):
    import daytona

    server = fast_server
    client = daytona.Daytona(daytona.DaytonaConfig(api_key=server.api_key, api_url=server.url))
    box = client.create(daytona.CreateSandboxFromSnapshotParams(
        network_block_all=True, auto_stop_interval=0, auto_delete_interval=-1))
    box.fs.upload_files([daytona.FileUpload(source=b"kept", destination="notes.txt")])
    box.process.exec("sleep 300 > /dev/null 2>&1 &")
    box.stop()
    assert _state(server, box.id) == "stopped"
    with pytest.raises(daytona.DaytonaError):  # its toolbox is gone with its processes
        box.process.exec("true")
    box.start()
    seen = box.process.exec("cat notes.txt; echo; ps -eo args | grep -c '^sleep 300' || true")
    assert seen.result.split() == ["kept", "0"], seen.result

    box.set_autostop_interval(1)  # idle for a "minute" (0.2 s): stopped ...
    _wait_for_state(server, box.id, "stopped")
    box.set_auto_delete_interval(0)  # ... and, stopped, deleted at once
    _wait_for_state(server, box.id, "destroyed")


def test_the_provider_never_hands_a_run_a_sandbox_stopped_while_it_was_idle(fast_server):
    from helpers.remote_setup import ENV, options

    from deepgym_ray.client import DeepGym

    server = fast_server
    client = DeepGym(mode="daytona", backend="threads",
                     **options(server, call_timeout=10.0, state_check_after=0.0,
                               auto_stop_minutes=1))
    try:
        server.lifecycle.minute = 60.0  # no auto-stop during the runs themselves
        assert client.run(ENV, ENV.reference_solution).score == 1.0
        [first] = client.provider.live_sandboxes()
        server.lifecycle.minute = 0.2
        _wait_for_state(server, first, "stopped")  # its auto-stop, well inside our window
        server.lifecycle.minute = 60.0
        again = client.run_safe(ENV, ENV.reference_solution)
        assert again.has_verdict and again.score == 1.0, again.details
        assert first not in client.provider.live_sandboxes()
    finally:
        client.close()


def test_a_session_is_one_long_lived_shell_whose_output_is_framed_by_line(sandbox):
    """As Daytona's daemon: a session's commands run one after another in one shell (its
    directory and variables last), their output goes through the log line by line (a last
    line without its newline gets one), split by stream; a second session of an id is 409."""
    import daytona

    server, box = sandbox
    box.process.create_session("s1")
    run = box.process.execute_session_command

    def finished_log(response, expected):
        """The command's log once it is ``expected``, or as it is after 30 s (the answer may
        come before the log's readers are done)."""
        import time

        deadline = time.monotonic() + 30
        while True:
            logs = box.process.get_session_command_logs("s1", response.cmd_id)
            if (logs.stdout, logs.stderr) == expected or time.monotonic() > deadline:
                return logs.stdout, logs.stderr
            time.sleep(0.05)

    first = run("s1", daytona.SessionExecuteRequest(command="cd /tmp; KEPT=yes; echo a; "
                                                            "printf 'b' >&2; printf c"))
    expected = ("a\nc\n", "b\n")
    assert first.exit_code == 0 and finished_log(first, expected) == expected, first
    later = run("s1", daytona.SessionExecuteRequest(command="echo $PWD $KEPT; exit_code() "
                                                            "{ return 3; }; exit_code"))
    expected = ("/tmp yes\n", "")
    assert later.exit_code == 3 and finished_log(later, expected) == expected, later
    with pytest.raises(daytona.DaytonaError) as again:
        box.process.create_session("s1")
    assert getattr(again.value, "status_code", None) == 409


def test_a_run_is_one_call_its_spec_in_the_environment_its_output_one_stream(daytona_server):
    """A warm sandbox's run is one ``process.exec``: its spec in the call's environment,
    its stdout and stderr one stream (the report after the end mark). With every upload and
    every session call refused, right and wrong answers are judged; a spec too large for one
    variable is uploaded (and fails with the refusal)."""
    from helpers.remote_setup import ENV, LARGE, WRONG, options

    from deepgym_ray.client import DeepGym

    server = daytona_server
    server.faults.clear()
    client = DeepGym(mode="daytona", backend="threads", **options(server))
    try:
        assert client.run(ENV, ENV.reference_solution).score == 1.0  # the judge's files go in
        refused = [server.faults.add(call, "status", status=403, times=None)
                   for call in ("upload", "session", "session_exec", "session_logs")]
        assert [client.run(ENV, a).score for a in (ENV.reference_solution, WRONG)] == [1.0, 0.0]
        assert [rule.hits for rule in refused] == [0, 0, 0, 0]
        assert len(client.provider.live_sandboxes()) == 1  # the same sandbox, kept
        large = client.run_safe(ENV, LARGE)
        assert not large.has_verdict and "HTTP 403" in large.details, large
        server.faults.clear()
        assert client.run(ENV, LARGE).score == 1.0
    finally:
        client.close()
        server.faults.clear()
