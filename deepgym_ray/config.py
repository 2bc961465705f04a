"""Configuration: which sandbox provider to use and how the Ray pool is shaped.

Every setting has a default that works on a laptop; the YAML files in ``configs/`` are the
common setups.

Example:
    >>> cfg = DeepGymConfig(mode="local", pool=PoolConfig(actors=4))
    >>> cfg.pool.actors
    4
    >>> DeepGymConfig.from_yaml("local").mode  # a shipped config, by name
    'local'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "MODES",
    "ConfigError",
    "DeepGymConfig",
    "PoolConfig",
    "check_max_parallel",
    "check_mode_name",
    "config_path",
    "describe_errors",
    "named_configs",
]

#: The sandbox modes a config may name ('auto': Daytona when configured, else local).
MODES = ("auto", "local", "docker", "daytona", "e2b", "modal")
#: The configurations shipped with the package (``--config local`` names one of them).
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"


def check_max_parallel(value: object) -> int:
    """``value`` when it is a valid cap on runs in flight (an int >= 1); ValueError otherwise.

    One check for every entry point that takes ``max_parallel`` (client, pool, rewards), so
    they all refuse the same values with the same message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_parallel must be an int >= 1, got {value!r}")
    return value


def check_mode_name(value: object) -> str:
    """``value`` when it names a sandbox mode; ValueError with the choices otherwise."""
    if not isinstance(value, str) or value not in MODES:
        raise ValueError(f"unknown sandbox mode {value!r}; choose one of {', '.join(MODES)}")
    return value


class ConfigError(ValueError):
    """A setting, or a configuration file, is invalid; the message names each bad setting."""

    def __init__(self, message: str, *, problems: str | None = None) -> None:
        super().__init__(message)
        self.problems = problems or message


def describe_errors(exc: ValidationError) -> str:
    """A pydantic error as one line: each bad setting, what is wrong, the value given.

    A check of our own (``check_max_parallel``, ``check_mode_name``) keeps its own message,
    so a setting gets the same message from a config file, a keyword argument or a flag.
    """
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        own = (err.get("ctx") or {}).get("error")
        if isinstance(own, ValueError):
            problems.append(str(own))
        elif err["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown setting")
        else:
            problems.append(f"{where}: {err['msg']}, got {err.get('input')!r}")
    return "; ".join(problems)


def named_configs() -> list[str]:
    """The names of the configurations shipped with the package (``local``, ``cluster``...)."""
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))


def config_path(name_or_path: str | Path) -> Path:
    """A config file's path: the file given, or a shipped config by name (``local``)."""
    path = Path(name_or_path).expanduser()
    text = str(name_or_path)
    if path.exists() or "/" in text or text.endswith((".yaml", ".yml")):
        return path
    shipped = CONFIGS_DIR / f"{text}.yaml"
    if shipped.is_file():
        return shipped
    raise ConfigError(f"no config file {text!r} and no shipped config of that name; "
                      f"shipped: {', '.join(named_configs())}")


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

    mode: str = "auto"  # one of MODES, checked by _mode
    provider_options: dict[str, Any] = Field(default_factory=dict)
    # The Ray pool, this process's threads, or auto: the pool when this process is on Ray
    # or a cluster is running, threads otherwise (a local Ray adds start-up, not cores).
    backend: Literal["auto", "ray", "threads"] = "auto"
    max_parallel: int = Field(default=32, ge=1)
    pool: PoolConfig = Field(default_factory=PoolConfig)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # one line per bad setting, not pydantic's report
            problems = describe_errors(exc)
            raise ConfigError(f"invalid settings: {problems}", problems=problems) from None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return check_mode_name(value)

    @field_validator("max_parallel", mode="before")
    @classmethod
    def _max_parallel(cls, value: Any) -> Any:
        return check_max_parallel(value)

    @classmethod
    def from_dict(cls, data: Any, source: str = "settings") -> DeepGymConfig:
        """Validate ``data``; a ConfigError names ``source`` and each bad setting."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source} must be a mapping, got {type(data).__name__}")
        try:
            return cls(**data)
        except ConfigError as exc:
            if source == "settings":
                raise
            raise ConfigError(f"{source} is invalid: {exc.problems}",
                              problems=exc.problems) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> DeepGymConfig:
        """Load and validate a YAML file (or a shipped config by name: ``local``, ``cluster``,
        ``daytona``); errors name the file and the setting at fault. A UTF-8 BOM is fine."""
        import yaml

        path = config_path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
        return cls.from_dict(data, f"config {path}")
