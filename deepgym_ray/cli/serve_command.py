"""The ``serve`` command: check its settings, then start the reward service
(:mod:`deepgym_ray.integrations.serve`) and serve until interrupted.

Example:
    $ deepgym-ray serve --env coin_change --port 8000
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from deepgym_ray.cli.errors import EXIT_FAILED, EXIT_OK, BadInput

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.integrations.serve import ServeSettings

__all__ = ["add_parser", "run"]


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
    parser.add_argument("--tokenizer", metavar="PATH",
                        help="the model's tokenizer (a local folder): its special tokens are "
                             "dropped around each response, besides the common ones")
    parser.add_argument("--max-body-mb", type=int, default=64, metavar="N",
                        help="largest request body taken, in MiB; a larger one is HTTP 413 "
                             "(default 64)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the ``serve`` command: check the input, deploy, serve until interrupted."""
    from pydantic import ValidationError

    from deepgym_ray.config import describe_errors

    # Imported here: every deepgym-ray command loads this module, and only serve needs it.
    from deepgym_ray.integrations.serve import (
        ServeConflict,
        ServeSettings,
        ServiceStopped,
        start_service,
        stop_service,
        watch_service,
    )

    try:
        settings = ServeSettings(env=args.env, mixed=args.mixed, config=args.config,
                                 host=args.host, port=args.port,
                                 no_verdict_score=args.no_verdict_score,
                                 max_batch_size=args.max_batch_size,
                                 max_parallel=args.max_parallel,
                                 tokenizer=args.tokenizer, max_body_mb=args.max_body_mb)
        _check_sources(settings)
    except ValidationError as exc:
        raise BadInput(f"invalid serve settings: {describe_errors(exc)}") from None
    except (ValueError, LookupError, OSError) as exc:
        raise BadInput(f"invalid serve settings: {exc}") from None
    what = f"env {args.env}" if args.env else f"mixture {args.mixed}"
    try:
        url = start_service(settings)
    except ServeConflict as exc:
        raise BadInput(str(exc)) from None
    try:
        print(f"deepgym-ray serve: {what} on {url} (POST /get_reward, POST /score, "
              "GET /stats); Ctrl-C or SIGTERM stops it", flush=True)
        watch_service(settings)
    except ServiceStopped as exc:
        print(f"deepgym-ray serve: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    finally:  # the application would outlive the command on a running cluster
        stop_service()
    return EXIT_OK


def _check_sources(settings: ServeSettings) -> None:
    """Load what the service will load, here, so a typo fails before anything is deployed."""
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.reward.mixed_config import load_mixed_config
    from deepgym_ray.suites import resolve_environments

    if settings.mixed is not None:
        load_mixed_config(settings.mixed).build()
    else:
        resolve_environments(settings.env)
    if settings.config is not None:
        DeepGymConfig.from_yaml(settings.config)
    if settings.tokenizer is not None:
        from deepgym_ray.integrations.rows import special_tokens_of

        special_tokens_of(settings.tokenizer)
