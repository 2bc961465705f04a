"""A mixture of environments written down in a YAML file, for services and trainer configs.

``deepgym-ray serve --mixed FILE`` and verl's ``reward_kwargs.mixed`` read the same file:

.. code-block:: yaml

    environments:              # names, suites (every member), suite members or folders
      - coin_change            # weight 1
      - {name: knapsack_01, weight: 2}
      - {name: humaneval, weight: 1}   # a suite: its weight is shared by its members
    config: configs/local.yaml # optional: the DeepGymConfig (provider, pool) to score with

Example:
    >>> cfg = MixedConfig.model_validate({"environments": ["coin_change"]})
    >>> cfg.build().name
    'mixed(coin_change)'
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepgym_ray.config import ConfigError, DeepGymConfig
from deepgym_ray.reward.mixed import MixedEnvironment

__all__ = ["MixedConfig", "MixedEntry", "load_mixed_config", "mixture_of"]


class MixedEntry(BaseModel):
    """One line of the mixture: what to load and how much of the draw it gets."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)


class MixedConfig(BaseModel):
    """The environments of a mixture, and optionally the client config to score them with."""

    model_config = ConfigDict(extra="forbid")

    environments: list[str | MixedEntry] = Field(min_length=1)
    config: str | None = None

    def entries(self) -> list[MixedEntry]:
        return [e if isinstance(e, MixedEntry) else MixedEntry(name=e) for e in self.environments]

    def build(self) -> MixedEnvironment:
        """Load every environment (a suite's members share its weight) into a mixture."""
        return mixture_of([(e.name, e.weight) for e in self.entries()])

    def client_config(self, base: Path | None = None) -> DeepGymConfig | None:
        """The DeepGymConfig named by ``config`` (relative to ``base``), or None."""
        if self.config is None:
            return None
        path = Path(self.config)
        if base is not None and not path.is_absolute():
            path = base / path
        return DeepGymConfig.from_yaml(path)


def mixture_of(names: list[tuple[str, float]] | list[str]) -> MixedEnvironment:
    """A MixedEnvironment of names as ``deepgym-ray eval`` understands them (a suite, a suite
    member, an environment or a folder); a suite's weight is split over its members."""
    from deepgym_ray.suites import resolve_environments

    pairs = []
    for item in names:
        name, weight = item if isinstance(item, tuple) else (item, 1.0)
        envs = resolve_environments(name)
        pairs.extend((env, weight / len(envs)) for env in envs)
    return MixedEnvironment(environments=pairs)


def load_mixed_config(path: str | Path) -> MixedConfig:
    """Read and validate a mixture file; errors name the file and the field at fault."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read mixture {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"mixture {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"mixture {path} must be a mapping with 'environments', "
                          f"got {type(data).__name__}")
    try:
        return MixedConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                             for err in exc.errors())
        raise ConfigError(f"mixture {path} is invalid: {problems}") from exc
