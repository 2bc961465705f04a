"""The docker provider's parts that need no engine, and its errors when there is none."""

from __future__ import annotations

import sys

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.exceptions import SandboxError, is_infrastructure_failure
from deepgym_ray.sandboxes import make_provider
from deepgym_ray.sandboxes.base import Sandbox
from deepgym_ray.sandboxes.docker import DEFAULT_IMAGE, DockerProvider, _Run, agent
from deepgym_ray.suites import load_environment

NO_ENGINE = "unix:///nonexistent/deepgym-docker.sock"


def test_make_provider_builds_it_without_touching_the_engine(monkeypatch):
    monkeypatch.delenv("DEEPGYM_DOCKER_IMAGE", raising=False)
    provider = make_provider("docker", base_url=NO_ENGINE)
    assert isinstance(provider, DockerProvider) and provider.name == "docker"
    assert provider.image == DEFAULT_IMAGE == "python:3.11-slim"
    # check=False: a pool actor's copy of a client, made where the engine had answered
    assert DeepGym(mode="docker", base_url=NO_ENGINE, check=False).provider.name == "docker"


def test_the_image_option_and_its_environment_default(monkeypatch):
    monkeypatch.setenv("DEEPGYM_DOCKER_IMAGE", "local/python:test")
    assert DockerProvider().image == "local/python:test"
    assert DockerProvider(image="other:1").image == "other:1"


def test_preflight_names_an_unreachable_engine_in_one_line():
    with pytest.raises(SandboxError) as caught:
        DockerProvider.preflight(base_url=NO_ENGINE)
    text = str(caught.value)
    assert "not reachable" in text and "\n" not in text, text


def test_preflight_names_a_missing_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # what an absent package looks like
    with pytest.raises(SandboxError, match="'docker' Python package") as caught:
        DockerProvider.preflight()
    assert "\n" not in str(caught.value)


def test_an_unreachable_engine_is_no_verdict_and_infrastructure():
    env = load_environment("coin_change")
    # the engine answered when the client was made (check=False), and is gone since
    client = DeepGym(mode="docker", backend="threads", base_url=NO_ENGINE, check=False)
    result = client.run_safe(env, env.reference_solution)
    assert not result.has_verdict and result.error_type == "sandbox_error", result
    with pytest.raises(SandboxError) as caught:
        client.run(env, env.reference_solution)
    assert is_infrastructure_failure(caught.value), caught.value


def test_put_files_refuses_paths_outside_the_sandbox():
    provider = DockerProvider(base_url=NO_ENGINE)
    sandbox = Sandbox(id="x", provider="docker", handle=_Run(container=None, timeout=1))
    for bad in ("../escape.py", "/etc/passwd", ""):
        with pytest.raises(SandboxError, match="not a relative path"):
            provider.put_files(sandbox, {bad: b"x"})
    provider.put_files(sandbox, {"data/ok.txt": b"x", "deepgym_runner.py":
                                 provider._files["deepgym_runner.py"]})
    assert sandbox.handle.files == {"data/ok.txt": b"x"}  # the judge's files are there already


def test_frames_round_trip_and_wait_for_their_whole_length():
    frame = agent.pack({"kind": "result", "exit_code": 0}, [b"out", b"", b"\x00err"])
    assert agent.unpack(frame[:-1]) is None
    header, blobs, rest = agent.unpack(frame + b"next")
    assert header["kind"] == "result" and blobs == [b"out", b"", b"\x00err"] and rest == b"next"


def test_missing_image_names_it_and_the_build_script():
    from helpers.docker_engine import docker_skip_reason

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    env = load_environment("coin_change").model_copy(update={"image": "deepgym/absent:none"})
    client = DeepGym(mode="docker", backend="threads")
    try:
        with pytest.raises(SandboxError) as caught:
            client.run(env, env.reference_solution)
    finally:
        client.close()
    text = str(caught.value)
    assert "'deepgym/absent:none'" in text and "scripts/build_docker_image.sh" in text, text
