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

import argparse
import logging
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ServeSettings", "add_parser", "run", "start_service"]

logger = logging.getLogger(__name__)

APP_NAME = "deepgym-reward"


class ServeSettings(BaseModel):
    """The service's settings (the ``serve`` command's options)."""

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

    from deepgym_ray.cluster import ensure_ray
    from deepgym_ray.serve_app import MAX_CONCURRENT_BATCHES, RewardService

    ensure_ray()
    serve.start(http_options={"host": settings.host, "port": settings.port})
    deployment = serve.deployment(
        RewardService,
        name="RewardService",
        max_ongoing_requests=max(1024, settings.max_batch_size * MAX_CONCURRENT_BATCHES),
        ray_actor_options={"num_cpus": 0},  # it waits on the pool; the pool's actors work
    )
    serve.run(deployment.bind(settings), name=APP_NAME, route_prefix="/",
              blocking=blocking)
    return f"http://{settings.host}:{settings.port}"


# --- the ``serve`` command -------------------------------------------------------------------

def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to the ``deepgym-ray`` command's subparsers."""
    parser = subparsers.add_parser("serve", help="serve rewards over HTTP (Ray Serve)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--env", metavar="NAME", help="one environment (or suite) for all")
    source.add_argument("--mixed", metavar="FILE.yaml", help="a mixture file; rows are routed")
    parser.add_argument("--config", metavar="FILE.yaml", help="a DeepGymConfig YAML file")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--no-verdict-score", type=float, default=0.0, metavar="X",
                        help="OpenRLHF reward for a sample without a verdict (default 0.0)")
    parser.add_argument("--max-batch-size", type=int, default=64, metavar="N",
                        help="samples per pool map at most (default 64)")
    parser.add_argument("--max-parallel", type=int, default=64, metavar="N",
                        help="runs in flight per pool map (default 64)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the ``serve`` command: check the input, deploy, serve until interrupted."""
    from pydantic import ValidationError

    from deepgym_ray.cli import BadInput  # at call time: cli imports this module

    try:
        settings = ServeSettings(env=args.env, mixed=args.mixed, config=args.config,
                                 host=args.host, port=args.port,
                                 no_verdict_score=args.no_verdict_score,
                                 max_batch_size=args.max_batch_size,
                                 max_parallel=args.max_parallel)
        _check_sources(settings)
    except (ValidationError, ValueError, LookupError, OSError) as exc:
        raise BadInput(f"invalid serve settings: {exc}") from None
    what = f"env {args.env}" if args.env else f"mixture {args.mixed}"
    print(f"deepgym-ray serve: {what} on http://{settings.host}:{settings.port} "
          "(POST /get_reward, POST /score, GET /stats)", flush=True)
    start_service(settings, blocking=True)
    return 0


def _check_sources(settings: ServeSettings) -> None:
    """Load what the service will load, here, so a typo fails before anything is deployed."""
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.eval_runner import load_target
    from deepgym_ray.mixed_config import load_mixed_config

    if settings.mixed is not None:
        load_mixed_config(settings.mixed).build()
    else:
        load_target(settings.env)
    if settings.config is not None:
        DeepGymConfig.from_yaml(settings.config)
