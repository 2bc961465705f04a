"""The reward service's settings: the ``serve`` command's options, checked once.

Both the command's side (:mod:`~deepgym_ray.integrations.serve`) and the deployment
(:mod:`~deepgym_ray.integrations.serve_app`) read them; neither knows the other through them.

Example:
    >>> ServeSettings(env="coin_change").port
    8000
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ServeSettings"]


class ServeSettings(BaseModel):
    """The service's settings (the ``serve`` command's options). ``start_timeout_s``: how long
    a start may take for Ray Serve's proxies and the service's replica to come up;
    ``tokenizer``: the model's tokenizer (a local folder), whose special tokens are dropped
    around each response besides the common chat templates' ones; ``max_body_mb``: the
    largest request body taken, in MiB (a larger one is HTTP 413, refused before it is read:
    an OpenRLHF batch of 1,000 answers of 32 kB is 32 MiB)."""

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
    tokenizer: str | None = None
    max_body_mb: int = Field(default=64, ge=1)

    @property
    def max_body_bytes(self) -> int:
        """``max_body_mb`` in bytes."""
        return self.max_body_mb << 20

    @model_validator(mode="after")
    def _one_source(self) -> ServeSettings:
        if (self.env is None) == (self.mixed is None):
            raise ValueError("give exactly one of env (an environment) or mixed (a mixture file)")
        if not math.isfinite(self.no_verdict_score):  # JSON has no NaN; trainers want a number
            raise ValueError(f"no_verdict_score must be a finite number, "
                             f"got {self.no_verdict_score}")
        return self
