"""The local provider: limits, deadlines, cleanup, and make_provider's choices."""

from __future__ import annotations

import logging
import uuid

import pytest
from helpers.judge_probe import processes_with

from deepgym_ray.exceptions import DeepGymError, SandboxError
from deepgym_ray.models import Environment
from deepgym_ray.sandboxes import make_provider, resolve_mode
from deepgym_ray.sandboxes.local import LocalProvider

ENV = Environment(name="box", verifier_code="return 1.0", timeout=5, case_timeout=2)


@pytest.fixture(scope="module")
def provider():
    return LocalProvider()


def test_run_collects_output_and_exit_code(provider):
    box = provider.create(ENV)
    try:
        provider.put_files(box, {"sub/a.py": b"import sys\nprint(sys.stdin.read())\nsys.exit(3)"})
        result = provider.run(box, ["python3", "-I", "sub/a.py"], timeout=10, stdin=b"hi")
    finally:
        provider.destroy(box)
    assert result.exit_code == 3 and result.stdout.strip() == b"hi" and not result.timed_out


def test_deadline_kills_the_whole_group_and_background_processes(provider):
    mark = "DGMARK" + uuid.uuid4().hex[:12]
    script = (f"import subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{mark}'])\n"
              "time.sleep(60)\n")
    box = provider.create(ENV)
    try:
        provider.put_files(box, {"a.py": script.encode()})
        result = provider.run(box, ["python3", "-I", "a.py"], timeout=1)
    finally:
        provider.destroy(box)
    assert result.timed_out and result.exit_code is None
    assert processes_with(mark) == []


def test_put_files_refuses_paths_outside(provider):
    box = provider.create(ENV)
    try:
        for bad in ("../x.py", "/etc/x"):
            with pytest.raises(SandboxError):
                provider.put_files(box, {bad: b""})
    finally:
        provider.destroy(box)


def test_destroy_removes_the_work_dirs(provider):
    box = provider.create(ENV)
    provider.put_files(box, {"a.txt": b"x"})
    dirs = [box.handle.work_dir, box.handle.solution_dir.parent]
    provider.destroy(box)
    assert not any(d.exists() for d in dirs)


def test_without_bubblewrap_it_still_judges_and_warns(caplog):
    from deepgym_ray.client import DeepGym
    from deepgym_ray.sandboxes.local import report
    from deepgym_ray.suites import load_environment

    report._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="deepgym_ray.sandboxes.local"):
        provider = LocalProvider(isolation="none")
    assert provider.isolation["namespaces"] is False
    assert "bubblewrap" in caplog.text
    env = load_environment("coin_change")
    assert DeepGym(provider=provider).run(env, env.reference_solution).score == 1.0


def test_make_provider_modes(monkeypatch, caplog):
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    assert resolve_mode("auto") == "local"
    assert make_provider("local").name == "local"
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        make_provider("bogus")
    import importlib.util

    if importlib.util.find_spec("daytona") is None:
        monkeypatch.setenv("DAYTONA_API_KEY", "k")
        with caplog.at_level(logging.WARNING):
            assert resolve_mode("auto") == "local"
    if importlib.util.find_spec("deepgym_ray.sandboxes.docker") is None:
        with pytest.raises(DeepGymError, match="not built yet"):
            make_provider("docker")


def test_directories_of_dead_processes_are_swept(monkeypatch, tmp_path):
    from deepgym_ray.sandboxes.local import workarea

    monkeypatch.setattr(workarea.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(workarea, "_SWEPT", False)
    stale = tmp_path / "deepgym-run-999999999-abc"  # no such pid: its owner is gone
    live = tmp_path / f"deepgym-sol-{__import__('os').getpid()}-abc"
    for path in (stale, live):
        path.mkdir()
        (path / "f").write_text("x")
    LocalProvider().close()
    assert not stale.exists() and live.exists()
