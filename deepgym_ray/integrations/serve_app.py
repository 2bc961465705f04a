"""The reward service's Ray Serve deployment (endpoints: :mod:`~deepgym_ray.integrations.serve`).

Every sample of every request goes through one ``serve.batch`` queue, so concurrent
single-sample requests reach the pool as one map of up to ``max_batch_size`` samples.

A request body is read up to the settings' ``max_body_mb``: one announcing more (its
``Content-Length``) is refused before any of it is read, one sent without a length as soon as
it passes the limit (HTTP 413), so a client can make the service hold no more than one limit
per request. A body that is not JSON (or nests deeper than the parser goes) is HTTP 400.
"""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Any

from ray import serve

from deepgym_ray.integrations.serve_settings import ServeSettings

__all__ = ["MAX_CONCURRENT_BATCHES", "BadRequest", "RewardService"]

# Batches scored at once: a second batch fills the pool's slots that the first one's last
# runs leave idle; more would only split the queue into smaller maps.
MAX_CONCURRENT_BATCHES = 2


def _build_scorer(settings: ServeSettings) -> Any:
    from deepgym_ray.integrations.rows import row_scorer

    env = None
    if settings.mixed is None:
        from deepgym_ray.reward.mixed_config import mixture_of
        from deepgym_ray.suites import resolve_environments

        envs = resolve_environments(settings.env)
        env = envs[0] if len(envs) == 1 else mixture_of([settings.env])
    return row_scorer(env, mixed=settings.mixed, config=settings.config,
                      tokenizer=settings.tokenizer, max_parallel=settings.max_parallel,
                      no_verdict_score=settings.no_verdict_score)


def _response_of(query: str, prompt: str | None) -> str:
    """The model's response inside OpenRLHF's ``query``: OpenRLHF decodes the prompt's tokens
    and the response's together, special tokens included (left padding first, in 0.9), so the
    response is what follows the prompt's text. Where the prompt's text does not come back
    as it was sent, the whole query: the answer's fenced block is still its last one."""
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            return query[at + len(prompt):]
    return query


def _label_row(label: Any) -> dict[str, Any]:
    if isinstance(label, dict):
        return dict(label)
    return {"benchmark": label, "task_id": label}


class BadRequest(ValueError):
    """A request the service refuses with HTTP 400 (``status``: another 4xx)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def read_json(request: Any, limit: int, empty: Any = None) -> Any:
    """The request's body as JSON, read up to ``limit`` bytes (BadRequest 413 past it, 400
    when it is not JSON); ``empty`` for a body of whitespace only (None: refused too)."""
    too_large = BadRequest(f"the body is larger than this service takes "
                           f"({limit / (1 << 20):g} MB); send less at once", 413)
    announced = request.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise too_large
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise too_large
    if not raw.strip() and empty is not None:
        return empty
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise BadRequest("the body is not JSON") from None


def _as_list(value: Any, n: int, key: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise BadRequest(f"{key!r} has {len(value)} values for {n} completions")
        return value
    return [value] * n


def _served_names(settings: ServeSettings) -> frozenset[str] | None:
    """The names a label may give on a one-environment service (None for a mixture, which
    routes by label): the environment's (or suite's and its members')."""
    if settings.env is None:
        return None
    from deepgym_ray.suites import resolve_environments

    return frozenset([settings.env, *(e.name for e in resolve_environments(settings.env))])


def _known_names() -> frozenset[str]:
    """Every built-in environment's and suite's name (read once, not per request)."""
    from deepgym_ray.envs import builtin_names
    from deepgym_ray.suites import list_suites

    return frozenset([*builtin_names(), *list_suites()])


def _other_environment(label: Any, served: frozenset[str],
                       known: frozenset[str]) -> str | None:
    """The environment a label names when it is not this service's (else None): a label that
    is the dataset's ground truth is left alone, one naming another environment is refused."""
    name = label.get("env_name") if isinstance(label, dict) else label
    if not isinstance(name, str) or name in served:
        return None
    return name if name in known or isinstance(label, dict) else None


class RewardService:
    """The Serve deployment's class; see the module docstring."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.scorer = _build_scorer(settings)
        self.served = _served_names(settings)
        self.known = _known_names()
        self.batch_sizes: collections.Counter[int] = collections.Counter()
        from deepgym_ray.integrations.serve_sessions import SessionRoutes

        self.session_routes = SessionRoutes(self.scorer.client, self.scorer.env)
        self.max_body = settings.max_body_bytes
        self._score_batch.set_max_batch_size(settings.max_batch_size)
        self._score_batch.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.01,
                 max_concurrent_batches=MAX_CONCURRENT_BATCHES)
    async def _score_batch(self, items: list[tuple[Any, dict[str, Any]]]) -> list[Any]:
        """One pool map for every sample that queued up meanwhile."""
        self.batch_sizes[len(items)] += 1
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, self.scorer.score, [c for c, _ in items], [r for _, r in items])

    async def _score(self, completions: list[Any], rows: list[dict[str, Any]]) -> list[Any]:
        results = await asyncio.gather(*(self._score_batch((c, r))
                                         for c, r in zip(completions, rows, strict=True)))
        for result in results:
            if isinstance(result, ValueError):
                raise BadRequest(str(result))
        return results

    async def openrlhf(self, body: dict[str, Any]) -> dict[str, Any]:
        queries, prompts, labels = body.get("query"), body.get("prompts"), body.get("labels")
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise BadRequest("'query' must be a list of strings (prompt + response)")
        n = len(queries)
        prompts = _as_list(prompts, n, "prompts") if prompts is not None else [None] * n
        labels = _as_list(labels, n, "labels") if labels is not None else [None] * n
        for i, prompt in enumerate(prompts):
            if prompt is not None and not isinstance(prompt, str):
                raise BadRequest(f"'prompts'[{i}] must be a string, got "
                                 f"{type(prompt).__name__}")
        if self.served is not None:
            for i, label in enumerate(labels):
                other = _other_environment(label, self.served, self.known)
                if other is not None:
                    raise BadRequest(f"'labels'[{i}] names {other!r}, but this service scores "
                                     f"{self.settings.env!r} only")
        completions = [_response_of(q, p) for q, p in zip(queries, prompts, strict=True)]
        fields = await self._score(completions, [_label_row(label) for label in labels])
        rewards = [f["score"] for f in fields]
        return {"rewards": rewards, "scores": rewards,
                "extra_logs": {"has_verdict": [float(f["has_verdict"]) for f in fields]}}

    async def plain(self, body: dict[str, Any]) -> dict[str, Any]:
        from deepgym_ray.reward.mixed import NAME_FIELDS, SUITE_FIELDS, TASK_ID_FIELDS

        completions = body.get("completions")
        if not isinstance(completions, list):
            raise BadRequest("'completions' must be a list")
        n = len(completions)
        columns = {k: _as_list(body[k], n, k)
                   for k in (*NAME_FIELDS, *SUITE_FIELDS, *TASK_ID_FIELDS) if k in body}
        rows = [{k: col[i] for k, col in columns.items()} for i in range(n)]
        fields = await self._score(completions, rows)
        return {"rewards": [f["score"] if f["has_verdict"] else None for f in fields],
                "has_verdict": [f["has_verdict"] for f in fields],
                "error_type": [f["error_type"] or None for f in fields],
                "env_name": [f["env_name"] for f in fields]}

    async def _sessions(self, request: Any, path: str) -> Any:
        """``/v1/sessions`` (see :mod:`~deepgym_ray.integrations.serve_sessions`)."""
        from starlette.responses import JSONResponse

        body = await read_json(request, self.max_body, empty={})
        status, answer = await self.session_routes.handle(request.method, path, body)
        return JSONResponse(answer, status)

    def stats(self) -> dict[str, Any]:
        sizes = self.batch_sizes
        return {"maps": sum(sizes.values()), "items": sum(k * v for k, v in sizes.items()),
                "batch_sizes": {str(k): v for k, v in sorted(sizes.items())},
                "no_verdict": self.scorer.masked_rate.masked,
                "scored": self.scorer.masked_rate.total}

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        path = request.url.path.rstrip("/") or "/"
        try:
            if path == "/v1/sessions" or path.startswith("/v1/sessions/"):
                return await self._sessions(request, path)
            if request.method == "GET" and path == "/stats":
                return JSONResponse(self.stats())
            if request.method == "GET" and path == "/healthz":
                return JSONResponse({"ok": True})
            if request.method != "POST" or path not in ("/", "/get_reward", "/score"):
                return JSONResponse({"error": f"no endpoint {request.method} {path}"}, 404)
            body = await read_json(request, self.max_body)
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            if path == "/score":
                return JSONResponse(await self.plain(body))
            return JSONResponse(await self.openrlhf(body))
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, exc.status)
