"""An HTTP reward service on Ray Serve, in front of the shared verifier pool.

    deepgym-ray serve --env NAME | --mixed FILE.yaml [--host H] [--port N]

Endpoints (one deployment, ``RewardService``):

- ``POST /get_reward`` (also ``POST /``): OpenRLHF's remote reward protocol. The body is
  ``{"query": [prompt + response], "prompts": [prompt], "labels": [label]}`` (OpenRLHF sends one
  sample per request); the answer is ``{"rewards": [...], "scores": [...], "extra_logs":
  {"has_verdict": [...]}}``. The label routes the sample (an environment's name, a suite member
  or a task id, by MixedEnvironment's rules as ``benchmark`` then ``task_id``) unless the service
  has one environment. OpenRLHF has no notion of "no verdict": such a sample gets
  ``no_verdict_score`` (a setting, default 0.0) and ``has_verdict`` 0 in ``extra_logs``.
- ``POST /score``: ``{"completions": [...], "env_name": NAME or [...], <other routing fields>}``
  -> ``{"rewards": [float or null], "has_verdict": [...], "error_type": [...], "env_name":
  [...]}``; ``rewards`` follow the reward contract (null where there is no verdict).
- ``GET /stats``: how requests were batched (``maps``, ``items``, ``batch_sizes``) and the
  no-verdict counts.

Every sample of every request goes through one ``serve.batch`` queue: concurrent single-sample
requests leave it as one pool map of up to ``max_batch_size`` samples, so the pool is fed in
batches. A request whose metadata routes nowhere gets HTTP 400 naming the problem; the other
samples of its batch are scored as usual.

Example:
    $ deepgym-ray serve --mixed configs/mixed.yaml --port 8000 --no-verdict-score 0.0
    $ curl -s localhost:8000/get_reward -d '{"query": ["..."], "prompts": [""],
           "labels": ["coin_change"]}'
"""

from __future__ import annotations

import logging
import math
import time

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ServeSettings", "start_service"]

logger = logging.getLogger(__name__)

APP_NAME = "deepgym-reward"


class ServeSettings(BaseModel):
    """The service's settings (the ``serve`` command's options). ``start_timeout_s``: how long
    a start may take for Ray Serve's proxies and the service's replica to come up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str | None = None
    mixed: str | None = None
    config: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    no_verdict_score: float = 0.0
    max_batch_size: int = Field(default=64, ge=1)
    batch_wait_timeout_s: float = Field(default=0.01, ge=0)
    max_parallel: int = Field(default=64, ge=1)
    start_timeout_s: float = Field(default=600.0, gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> ServeSettings:
        if (self.env is None) == (self.mixed is None):
            raise ValueError("give exactly one of env (an environment) or mixed (a mixture file)")
        if not math.isfinite(self.no_verdict_score):  # JSON has no NaN; trainers want a number
            raise ValueError(f"no_verdict_score must be a finite number, "
                             f"got {self.no_verdict_score}")
        return self


def start_service(settings: ServeSettings, *, blocking: bool = False) -> str:
    """Start (or redeploy) the service on the cluster (Ray is joined or started) and return
    its base URL. ``blocking`` keeps this process serving until interrupted."""
    from ray import serve

    from deepgym_ray.integrations.serve_app import MAX_CONCURRENT_BATCHES, RewardService
    from deepgym_ray.pool.connect import ensure_ray

    ensure_ray()
    deployment = serve.deployment(
        RewardService,
        name="RewardService",
        max_ongoing_requests=max(1024, settings.max_batch_size * MAX_CONCURRENT_BATCHES),
        ray_actor_options={"num_cpus": 0},  # it waits on the pool; the pool's actors work
    )
    # Ray Serve gives its HTTP proxies a fixed 60 s to come up; with every core kept busy a
    # proxy took longer, and the start failed while the proxy was still on its way. What Ray
    # started goes on starting: a second start joins it, and the wait is ours, up to
    # start_timeout_s. (Running the application again would replace its replica.)
    deadline = time.monotonic() + settings.start_timeout_s
    http = {"host": settings.host, "port": settings.port}
    try:
        serve.start(http_options=http)
    except TimeoutError:
        serve.start(http_options=http)  # joins the controller the first start made
    try:
        serve.run(deployment.bind(settings), name=APP_NAME, route_prefix="/")
    except TimeoutError:  # deployed and running; its proxies are not serving yet
        pass
    _wait_until_serving(deadline, settings.start_timeout_s)
    if blocking:
        while True:  # until Ctrl-C, as serve.run(blocking=True) does
            time.sleep(10)
    return f"http://{settings.host}:{settings.port}"


def _wait_until_serving(deadline: float, limit: float) -> None:
    from ray import serve

    while True:
        status = serve.status()
        app = status.applications.get(APP_NAME)
        proxies = sorted(getattr(p, "value", p) for p in status.proxies.values())
        if app is not None and app.status == "RUNNING" and set(proxies) == {"HEALTHY"}:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"the reward service did not start within {limit:g} s (application: "
                f"{app.status if app else 'not deployed'}, proxies: {proxies or 'none'})")
        time.sleep(0.5)
