"""Configuration: which sandbox provider to use and how the Ray pool is shaped.

Every setting has a default that works on a laptop; the YAML files in ``configs/`` are the
common setups.

Example:
    >>> cfg = DeepGymConfig(mode="local", pool=PoolConfig(actors=4))
    >>> cfg.pool.actors
    4
    >>> DeepGymConfig.from_yaml("configs/local.yaml")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ConfigError", "DeepGymConfig", "PoolConfig", "check_max_parallel"]


def check_max_parallel(value: object) -> int:
    """``value`` when it is a valid cap on runs in flight (an int >= 1); ValueError otherwise.

    One check for every entry point that takes ``max_parallel`` (client, pool, rewards), so
    they all refuse the same values with the same message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_parallel must be an int >= 1, got {value!r}")
    return value


class ConfigError(ValueError):
    """A configuration file could not be read or did not validate."""


class PoolConfig(BaseModel):
    """The shared pool of verifier actors.

    ``actors`` and ``actor_concurrency`` default from the cluster's CPUs for the local provider;
    a remote provider (Daytona) wants many light actors instead, so set them.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="deepgym", min_length=1)
    namespace: str = Field(default="deepgym_ray", min_length=1)
    actors: int | None = Field(default=None, ge=1)
    actor_concurrency: int | None = Field(default=None, ge=1)
    num_cpus_per_actor: float = Field(default=1.0, ge=0)
    max_retries: int = Field(default=2, ge=0, le=20)


class DeepGymConfig(BaseModel):
    """Everything a :class:`~deepgym_ray.client.DeepGym` client needs to be rebuilt anywhere."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "local", "docker", "daytona"] = "auto"
    provider_options: dict[str, Any] = Field(default_factory=dict)
    backend: Literal["ray", "threads"] = "ray"
    max_parallel: int = Field(default=32, ge=1)
    pool: PoolConfig = Field(default_factory=PoolConfig)

    @classmethod
    def from_yaml(cls, path: str | Path) -> DeepGymConfig:
        """Load and validate a YAML file; errors name the file and the field at fault."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config {path} must be a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ConfigError(f"config {path} is invalid: {problems}") from exc
