"""The options the scoring commands share, and what they give: the settings (a config file
merged with the flags, checked like a file), the client, and the environments to score. Every
problem is a :class:`BadInput`, so a command reports it on one line before any work.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_client_options(parser)
    >>> settings_from(parser.parse_args(["--mode", "local"])).mode
    'local'
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from deepgym_ray.cli.errors import BadInput
from deepgym_ray.config import MODES, named_configs

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig

__all__ = ["add_client_options", "client_for", "load_target", "positive_number", "rate",
           "settings_from", "whole_number"]


def positive_number(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def whole_number(text: str) -> int:
    """A whole number; its range is checked with the other settings, with their messages."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def k_values(text: str) -> tuple[int, ...]:
    """pass@k's k values: ``1,10,100``."""
    values = []
    for part in text.split(","):
        try:
            value = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a list of whole numbers (1,10,100)") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"k must be at least 1, got {value}")
        values.append(value)
    return tuple(sorted(set(values)))


def rate(text: str) -> float:
    """A pass rate: a fraction (0.6) or a percentage (60%)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate (0.6 or 60%)") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate between 0 and 1 (or 0-100%)")
    return value


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """--config, --mode and --verbose, as every scoring command takes them."""
    parser.add_argument("--config", metavar="FILE.yaml|NAME",
                        help="a DeepGymConfig YAML file, or a shipped one by name "
                             f"({', '.join(named_configs())}); flags override it")
    parser.add_argument("--mode", choices=MODES, help="sandbox provider (default: auto)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more (-v info, -vv debug)")


def settings_from(args: argparse.Namespace) -> DeepGymConfig:
    from deepgym_ray.config import ConfigError, DeepGymConfig

    try:
        config = DeepGymConfig.from_yaml(args.config) if args.config else DeepGymConfig()
        data = config.model_dump()
        if args.mode:
            data["mode"] = args.mode
        backend = getattr(args, "backend", None)
        if backend == "auto" and (args.config is None or "backend" not in config.model_fields_set):
            backend = _auto_backend()
        if backend in ("ray", "threads"):
            data["backend"] = backend
        if getattr(args, "pool_name", None):
            data["pool"]["name"] = args.pool_name
        if getattr(args, "max_parallel", None) is not None:
            data["max_parallel"] = args.max_parallel
        if getattr(args, "actors", None) is not None:
            data["pool"]["actors"] = args.actors
        # The merged settings are checked like a file's, with the same message per setting.
        return DeepGymConfig.from_dict(data, "settings") if data != config.model_dump() \
            else config
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def _auto_backend() -> str:
    """The Ray pool when a cluster is running; otherwise this process's threads (the client's
    own rule for ``backend="auto"``): on one machine a Ray instance adds start-up and
    processes but no cores, so it only slows an eval."""
    from deepgym_ray.pool.connect import auto_backend

    return auto_backend()


def client_for(config: DeepGymConfig) -> DeepGym:
    """The client, once its sandbox mode has passed the provider's preflight."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.exceptions import ProviderUnavailableError

    try:
        return DeepGym(config=config)
    except ProviderUnavailableError as exc:
        raise BadInput(f"--mode {config.mode}: {exc}") from None


def load_target(target: str, path: str | None = None) -> list[Any]:
    from deepgym_ray.suites import UnknownEnvironmentError, resolve_environments
    from deepgym_ray.suites.humaneval import HumanEvalUnavailable

    try:
        return resolve_environments(target, **({"path": path} if path else {}))
    except (UnknownEnvironmentError, HumanEvalUnavailable) as exc:
        raise BadInput(str(exc)) from None
    except TypeError as exc:  # --path for a target that reads no files
        raise BadInput(str(exc)) from None
    except (ValueError, OSError) as exc:  # a folder that is not a valid environment
        raise BadInput(f"cannot load environment {target!r}: {exc}") from None
