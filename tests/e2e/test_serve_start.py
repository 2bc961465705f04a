"""The reward service starts when Ray Serve's proxies take longer than Ray's own fixed wait.

Ray Serve gives its HTTP proxies 60 s to come up; with every core kept busy by another process
(scripts/stress_tests.sh) a proxy took 64 s and the start failed. Here Ray's wait is cut to
10 ms while its real proxies start at their own pace.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

pytestmark = pytest.mark.e2e

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("ray.serve")

from deepgym_ray.envs import load_environment  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _score(url: str, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, \
            session.post(f"{url}/score", data=json.dumps(body)) as response:
        return response.status, await response.json()


def test_proxies_slower_than_rays_own_wait_still_start_the_service(ray_local, monkeypatch):
    import ray.serve._private.api as serve_api
    import ray.serve._private.client as serve_client
    from ray import serve

    from deepgym_ray.integrations.serve import APP_NAME, ServeSettings, start_service

    monkeypatch.setattr(serve_api, "HTTP_PROXY_TIMEOUT", 0.01)
    monkeypatch.setattr(serve_client, "HTTP_PROXY_TIMEOUT", 0.01)
    runs = []  # Ray's own serve.run, counted: running the application again replaces it

    def counted_run(*args, **kwargs):
        runs.append(kwargs.get("name"))
        return real_run(*args, **kwargs)

    real_run = serve.run
    monkeypatch.setattr(serve, "run", counted_run)
    coin = load_environment("coin_change")
    try:
        url = start_service(ServeSettings(env="coin_change", port=_free_port()))
        status, answer = asyncio.run(_score(
            url, {"completions": [f"```python\n{coin.reference_solution}\n```"]}))
        assert status == 200 and answer["rewards"] == [1.0], answer
        assert runs == [APP_NAME]  # the wait on the proxies never ran it again
    finally:
        serve.shutdown()
