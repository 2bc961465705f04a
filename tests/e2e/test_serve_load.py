"""The Ray Serve reward service on 127.0.0.1: its start, and real HTTP load.

The start: Ray Serve gives its HTTP proxies a fixed 60 s to come up; with every core kept busy
by another process (scripts/stress_tests.sh) a proxy took 64 s and the start failed. The
module's service starts with Ray's wait cut to 10 ms while its real proxies start at their own
pace (one start for the whole module: under load a start took minutes).

The load: 500 single-sample OpenRLHF requests from 64 concurrent clients, every answer right,
and the pool fed in batches: the service's own count of pool maps and the pool actors' own
count of chunks both show many samples per map, not one.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any, NamedTuple

import pytest

pytestmark = pytest.mark.e2e

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("ray.serve")

from deepgym_ray.suites import load_environment  # noqa: E402

POOL = "serve-e2e"
REQUESTS, CLIENTS = 500, 64


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service(NamedTuple):
    url: str
    pool: Any  # the VerifierPool the service scores on
    runs: list[str]  # the applications Ray's own serve.run ran during the start
    settings: Any  # the service's ServeSettings


@pytest.fixture(scope="module")
def service(ray_local, tmp_path_factory):
    import ray.serve._private.api as serve_api
    import ray.serve._private.client as serve_client
    from ray import serve

    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.integrations.serve import ServeSettings, start_service
    from deepgym_ray.pool import get_pool

    tmp_path = tmp_path_factory.mktemp("serve")
    (tmp_path / "client.yaml").write_text(f"mode: local\npool:\n  name: {POOL}\n  actors: 2\n")
    mixture = tmp_path / "mixed.yaml"
    mixture.write_text("environments: [coin_change, fibonacci_mod]\nconfig: client.yaml\n")
    # A wait long enough that the clients waiting meanwhile join the batch whatever the
    # machine's speed: each batch then holds most of the requests in flight.
    settings = ServeSettings(mixed=str(mixture), port=_free_port(), max_batch_size=64,
                             batch_wait_timeout_s=0.2)
    pool = get_pool(DeepGym(config=DeepGymConfig.from_yaml(tmp_path / "client.yaml")))
    runs: list[str] = []  # running the application again would replace it: counted
    real_run = serve.run

    def counted_run(*args, **kwargs):
        runs.append(kwargs.get("name"))
        return real_run(*args, **kwargs)

    try:  # a start that failed is shut down too: the next test's start must not join it
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(serve_api, "HTTP_PROXY_TIMEOUT", 0.01)
            patch.setattr(serve_client, "HTTP_PROXY_TIMEOUT", 0.01)
            patch.setattr(serve, "run", counted_run)
            url = start_service(settings)
        yield Service(url, pool, runs, settings)
    finally:
        serve.shutdown()
        pool.shutdown()


async def _post(session, url, body):
    async with session.post(url, data=json.dumps(body)) as response:
        return response.status, await response.json()


async def _load(url, bodies):
    """Send every body from CLIENTS concurrent clients, one sample per request."""
    queue: asyncio.Queue = asyncio.Queue()
    for i, body in enumerate(bodies):
        queue.put_nowait((i, body))
    answers: list = [None] * len(bodies)

    async def client(session):
        while not queue.empty():
            i, body = queue.get_nowait()
            answers[i] = await _post(session, f"{url}/get_reward", body)

    connector = aiohttp.TCPConnector(limit=CLIENTS)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(client(session) for _ in range(CLIENTS)))
    return answers


async def _post_once(url, body):
    async with aiohttp.ClientSession() as session:
        return await _post(session, url, body)


async def _get(url):
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.json()


def test_proxies_slower_than_rays_own_wait_still_start_the_service(service):
    from deepgym_ray.integrations.serve import APP_NAME

    assert service.runs == [APP_NAME]  # the wait on the proxies never ran it again
    coin = load_environment("coin_change")
    status, answer = asyncio.run(_post_once(
        f"{service.url}/score", {"completions": [f"```python\n{coin.reference_solution}\n```"],
                                 "env_name": ["coin_change"]}))
    assert status == 200 and answer["rewards"] == [1.0], answer


# 500 requests from 64 clients, about eight per client, every client's requests in flight
# beside the others' (1,000 cost the suite 24 s of CPU more, 2,000 40 s more, for no other
# path): two environments whose runs are cheap (knapsack_01's cost four times
# coin_change's); with every core kept busy by another process (the suite's stress script)
# 1,000 took over 300 s, the suite's default limit.
@pytest.mark.timeout(1200)
def test_openrlhf_requests_under_load_are_right_and_reach_the_pool_in_batches(service):
    url, pool = service.url, service.pool
    envs = [load_environment("coin_change"), load_environment("fibonacci_mod")]
    bodies = []
    for i in range(REQUESTS):
        env = envs[i % 2]
        prompt = f"<|user|>{env.task}<|assistant|>"
        answer = f"Here it is.\n```python\n{env.reference_solution}\n```"
        bodies.append({"query": [prompt + answer], "prompts": [prompt], "labels": [env.name]})
    runs_before = sum(s["runs"] for s in pool.stats())
    chunks_before = sum(s["chunks"] for s in pool.stats())
    before = asyncio.run(_get(f"{url}/stats"))  # the module's other tests share the service

    answers = asyncio.run(_load(url, bodies))

    assert [status for status, _ in answers] == [200] * REQUESTS
    wrong = [a for _, a in answers if a["rewards"] != [1.0] or a["scores"] != [1.0]]
    assert not wrong, (len(wrong), wrong[:3])
    assert all(a["extra_logs"] == {"has_verdict": [1.0]} for _, a in answers)
    after = asyncio.run(_get(f"{url}/stats"))
    stats = {key: after[key] - before[key] for key in ("items", "no_verdict", "maps")}
    sizes = {int(k): v - before["batch_sizes"].get(k, 0)
             for k, v in after["batch_sizes"].items()}
    sizes = {size: n for size, n in sizes.items() if n}
    assert stats["items"] == REQUESTS and stats["no_verdict"] == 0
    # Fed in batches: far fewer pool maps than samples, and some maps of many samples.
    assert stats["maps"] <= REQUESTS // 4, sizes
    assert max(sizes) >= 8, sizes
    runs = sum(s["runs"] for s in pool.stats()) - runs_before
    chunks = sum(s["chunks"] for s in pool.stats()) - chunks_before
    assert runs == REQUESTS
    assert chunks <= REQUESTS // 4, (runs, chunks)  # the actors got many answers per call


def test_plain_endpoint_and_bad_requests(service):
    url = service.url
    coin = load_environment("coin_change")
    right = f"```python\n{coin.reference_solution}\n```"

    async def scenario():
        async with aiohttp.ClientSession() as session:
            plain = await _post(session, f"{url}/score", {
                "completions": [right, "```python\nprint(1)\n```"],
                "env_name": ["coin_change", "fibonacci_mod"]})
            unknown = await _post(session, f"{url}/get_reward", {
                "query": [right], "prompts": [""], "labels": ["no_such_env"]})
            not_list = await _post(session, f"{url}/score", {"completions": "x"})
            return plain, unknown, not_list

    plain, unknown, not_list = asyncio.run(scenario())
    assert plain[0] == 200
    assert plain[1]["rewards"][0] == 1.0 and plain[1]["has_verdict"] == [True, True]
    assert plain[1]["env_name"] == ["coin_change", "fibonacci_mod"]
    assert plain[1]["rewards"][1] == 0.0 and plain[1]["error_type"][0] is None
    assert unknown[0] == 400 and "no_such_env" in unknown[1]["error"]
    assert not_list[0] == 400 and "completions" in not_list[1]["error"]



# OpenRLHF's side, as its source does it (0.11: ``SingleTurnAgentExecutor``; 0.9:
# ``request_api_wrapper`` with the experience maker's batch): the query is the prompt's tokens
# and the response's decoded together with skip_special_tokens=False, so the end-of-turn token
# follows the answer (and 0.9's batch adds left and right padding); the labels are the
# dataset's; a status other than 2xx is retried (aiohttp, 5 tries) or raised (requests).


@pytest.fixture(scope="module")
def chat_tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from deepgym_ray.integrations.tiny import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tokenizer"), hidden_size=8, num_layers=1)
    return AutoTokenizer.from_pretrained(path)


def _openrlhf_query(tokenizer, task: str, response: str, padding: int = 0) -> tuple[str, str]:
    """(query, prompt) as OpenRLHF builds them for one sample."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": task}], tokenize=False,
                                           add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    action_ids = tokenizer(response, add_special_tokens=False)["input_ids"] \
        + [tokenizer.eos_token_id]
    pad = [tokenizer.pad_token_id] * padding
    return tokenizer.decode(pad + prompt_ids + action_ids + pad, skip_special_tokens=False), prompt


async def _openrlhf_011_post(url: str, payload: dict) -> dict:
    timeout = aiohttp.ClientTimeout(total=180)
    for _ in range(5):
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, \
                    session.post(url, json=payload) as response:
                response.raise_for_status()
                return await response.json()
        except aiohttp.ClientError:
            await asyncio.sleep(1)
    raise RuntimeError("the reward service failed 5 times")


def _openrlhf_09_post(url: str, payload: dict) -> list:
    import requests

    response = requests.post(url=url, json=payload,
                             headers={"Content-Type": "application/json"}, timeout=180)
    response.raise_for_status()
    return response.json()["rewards"]


def _answers(env) -> tuple[str, str]:
    right = f"Here is my solution.\n```python\n{env.reference_solution}\n```"
    wrong = "```python\ndef coin_change(coins, amount):\n    return None\n```"
    return right, wrong


def test_openrlhf_011_single_samples_with_special_tokens_score_right(service, chat_tokenizer):
    coin = load_environment("coin_change")
    right, wrong = _answers(coin)
    scored = []
    for response in (right, wrong):
        query, prompt = _openrlhf_query(chat_tokenizer, coin.task, response)
        assert query.endswith("```<|im_end|>")  # what made every right answer a 0
        scored.append(asyncio.run(_openrlhf_011_post(
            f"{service.url}/get_reward",
            {"query": [query], "prompts": [prompt], "labels": ["coin_change"]})))
    assert [r["rewards"] for r in scored] == [[1.0], [0.0]], scored
    assert [r["extra_logs"]["has_verdict"] for r in scored] == [[1.0], [1.0]]


def test_openrlhf_09_batches_with_padding_score_right(service, chat_tokenizer):
    coin, fib = load_environment("coin_change"), load_environment("fibonacci_mod")
    samples = [(coin, _answers(coin)[0], 1.0), (coin, _answers(coin)[1], 0.0),
               (fib, f"```python\n{fib.reference_solution}\n```", 1.0),
               (fib, "def fib_mod(n, m):\n    return None\n", 0.0)]
    queries, prompts = zip(*(_openrlhf_query(chat_tokenizer, env.task, response, padding=2)
                             for env, response, _ in samples), strict=True)
    rewards = _openrlhf_09_post(f"{service.url}/get_reward", {
        "query": list(queries), "prompts": list(prompts),
        "labels": [env.name for env, _, _ in samples]})
    assert rewards == [want for _, _, want in samples]


def test_malformed_openrlhf_requests_are_refused_with_400(service):
    import requests

    url = f"{service.url}/get_reward"
    bad = {
        "labels": {"query": ["a", "b"], "prompts": ["", ""], "labels": ["coin_change"]},
        "prompts": {"query": ["a"], "prompts": ["", ""], "labels": ["coin_change"]},
        "'prompts'[0]": {"query": ["a"], "prompts": [3], "labels": ["coin_change"]},
        "query": {"query": "a", "labels": ["coin_change"]},
        "no_such_env": {"query": ["a"], "prompts": [""], "labels": ["no_such_env"]},
    }
    for named, body in bad.items():
        response = requests.post(url, json=body, timeout=60)
        assert response.status_code == 400, (named, response.status_code, response.text)
        assert named in response.json()["error"], (named, response.json())

async def _session_call(method, url, body=None):
    async with aiohttp.ClientSession() as session, session.request(
            method, url, data=None if body is None else json.dumps(body)) as response:
        return response.status, await response.json()


def _announced_too_large(url: str, path: str) -> int:
    """The status of a request announcing a 10 GB body (none of it sent)."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    try:
        connection.putrequest("POST", path)
        connection.putheader("Content-Length", str(10 << 30))
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_an_agent_episode_over_http(service):
    """``/v1/sessions`` on the running service: open, step, score, and the errors a client
    gets for a bad action, an unknown session and one that has ended. (Before the test that
    deletes the service's application.)"""
    env = load_environment("sales_report")
    base = f"{service.url}/v1/sessions"
    status, opened = asyncio.run(_session_call("POST", base, {"env_name": "sales_report"}))
    assert status == 200 and "sales.csv" in opened["observation"]["content"], opened
    sid = opened["session_id"]
    status, refused = asyncio.run(_session_call("POST", f"{base}/{sid}/step",
                                                {"action_type": "code", "content": "1"}))
    assert status == 200 and refused["observation"]["metadata"]["error"] == "action_not_allowed"
    status, bad = asyncio.run(_session_call("POST", f"{base}/{sid}/step",
                                            {"action_type": "jump"}))
    assert status == 400 and "action_type" in bad["error"]
    for action in json.loads(env.reference_solution):
        status, stepped = asyncio.run(_session_call("POST", f"{base}/{sid}/step", action))
        assert status == 200, stepped
    assert stepped["done"] is True
    status, result = asyncio.run(_session_call("POST", f"{base}/{sid}/score"))
    assert status == 200 and result["reward"] == 1.0 and result["has_verdict"], result
    status, late = asyncio.run(_session_call("POST", f"{base}/{sid}/step",
                                             {"action_type": "done"}))
    assert status == 409 and late["result"]["reward"] == 1.0
    status, gone = asyncio.run(_session_call("POST", f"{base}/0.no-such-session/step",
                                             {"action_type": "done"}))
    assert status == 410 and gone["result"]["has_verdict"] is False
    # What the actor raised reaches the client as its message, never as Ray's traceback.
    assert "ray::" not in late["error"] + gone["error"] + gone["result"]["details"], (late, gone)
    assert _announced_too_large(service.url, f"/v1/sessions/{sid}/step") == 413
    assert asyncio.run(_session_call("DELETE", f"{base}/0.no-such-session"))[0] == 404
    assert asyncio.run(_session_call("DELETE", f"{base}/x"))[0] == 404

    status, opened = asyncio.run(_session_call("POST", base, {"env_name": "fix_the_calculator"}))
    status, deleted = asyncio.run(_session_call("DELETE", f"{base}/{opened['session_id']}"))
    assert status == 200 and deleted["error_type"] == "session_abandoned"
    assert asyncio.run(_session_call("POST", base, {"env_name": "coin_change"}))[0] == 400



def test_a_service_whose_application_is_gone_is_found_out(service):
    """(Last in the module: it removes the service's application.)"""
    from ray import serve

    from deepgym_ray.integrations.serve import (
        APP_NAME,
        ServiceStopped,
        service_problem,
        watch_service,
    )

    assert service_problem(service.settings) is None
    serve.delete(APP_NAME)
    assert "not deployed" in (service_problem(service.settings) or "")
    with pytest.raises(ServiceStopped, match="stopped serving"):
        watch_service(service.settings, interval_s=0.01, strikes=2)

