"""Hostile clients of the reward service's agent episodes over HTTP (``deepgym-ray serve``,
``/v1/sessions``), for the security battery's service modules (``test_http_*``). Each module is
one attack: its ``TAGS`` and its ``PROVIDER`` (the sandboxes the service's pool runs on) go to
RELIABILITY.md, one row per module.

The service is its own deployment class, ``RewardService``, behind a real HTTP server in this
process (uvicorn, speaking ASGI to it as Ray Serve's proxy does), on the battery's pool of local
sandboxes (tests/security/conftest.py): a start costs a fraction of a second, where Ray Serve's
own took a minute on a busy machine. tests/e2e/test_serve_load.py drives the same endpoints
through Ray Serve.

What a hostile client must get: an HTTP 4xx whose JSON ``error`` names what was wrong, never a
500 and never a traceback; and no other client's episode may change or lose its one result.

Example::

    from service_attacks import service_fixture  # noqa: F401 - the fixture "service"

    def test_x(service):
        status, answer = service.post("/v1/sessions", {"env_name": "sales_report"})
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests
import yaml

PROVIDER = "local"
ENV = "sales_report"  # a built-in multi-turn environment: 10 steps of 20 s at most
# What a traceback or Ray's report of a remote one looks like: a client must see none of them.
TRACEBACK_SIGNS = ("Traceback", "File \"", "ray::", "actor_id=", "pid=")


class Service:
    """A running service's base URL, with the calls a client makes (JSON in, JSON out)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             timeout: float = 120) -> tuple[int, dict[str, Any]]:
        """``(status, JSON answer)``; ``raw`` is sent as the body as it is."""
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        response = requests.request(method, self.url + path, data=data, timeout=timeout)
        return response.status_code, response.json()

    def post(self, path: str, body: Any = None, **options: Any) -> tuple[int, dict[str, Any]]:
        return self.call("POST", path, body, **options)

    def open(self) -> str:
        """A new episode of ``ENV``; its id."""
        status, answer = self.post("/v1/sessions", {"env_name": ENV})
        assert status == 200, answer
        return answer["session_id"]

    def step(self, sid: str, command: str) -> tuple[int, dict[str, Any]]:
        return self.post(f"/v1/sessions/{sid}/step", {"action_type": "bash", "content": command})

    def right_episode(self, sid: str) -> dict[str, Any]:
        """Play ``ENV``'s reference actions in episode ``sid``; its scored result."""
        from deepgym_ray.suites import load_environment

        for action in json.loads(load_environment(ENV).reference_solution):
            status, answer = self.post(f"/v1/sessions/{sid}/step", action)
            assert status == 200, answer
        status, result = self.post(f"/v1/sessions/{sid}/score")
        assert status == 200, result
        return result


def refused(status: int, answer: dict[str, Any], code: int, *named: str) -> None:
    """The service refused with ``code`` and an error naming each of ``named``, no traceback."""
    assert status == code, (status, answer)
    error = answer.get("error")
    assert isinstance(error, str) and error, answer
    for word in named:
        assert word in error, (word, answer)
    shown = json.dumps(answer)
    assert not any(sign in shown for sign in TRACEBACK_SIGNS), answer


def judged_right(result: dict[str, Any]) -> None:
    assert result["has_verdict"] and result["reward"] == 1.0, result


@contextmanager
def serving(client_config: Any, tmp_path, **settings: Any) -> Iterator[Service]:
    """The reward service of ``ENV`` on the pool ``client_config`` names, on 127.0.0.1."""
    import uvicorn
    from starlette.requests import Request

    from deepgym_ray.integrations.serve_app import RewardService
    from deepgym_ray.integrations.serve_settings import ServeSettings

    config_file = tmp_path / "client.yaml"
    config_file.write_text(yaml.safe_dump(client_config.model_dump(mode="json")))
    service = RewardService(ServeSettings(env=ENV, config=str(config_file), **settings))

    async def app(scope, receive, send):  # what Ray Serve does with a deployment's answer
        response = await service(Request(scope, receive))
        await response(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name="deepgym-test-service", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the test's HTTP server did not start")
            thread.join(0.05)
        yield Service(f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.fixture(name="service")
def service_fixture(session_pool_local, tmp_path):
    """``service``: the service on the battery's local session pool (see ``serving``); an
    attack module imports it to use it."""
    with serving(session_pool_local.config, tmp_path) as running:
        yield running


def service_attack(test):
    """Marks a service attack: it runs in the session attacks' xdist group, whose pools start
    once per worker (tests/conftest.py, tests/security/conftest.py)."""
    test.session_attack = True
    return test
