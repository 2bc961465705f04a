"""Score rows (a completion and its dataset metadata) into one fixed set of reward fields.

What verl's reward loop and the HTTP reward service share: each row is routed to its
environment on its own (a row whose metadata names no environment is an error for that row
only, never for the batch it came in), the routed rows are scored together on the client's
backend (the shared Ray pool), and every row gets the same keys back, which is what a trainer
that reads its reward columns off the first sample needs:

- ``score``: the score, or ``no_verdict_score`` where there was no verdict (a trainer without
  masking needs a number; the judged-only verl estimator reads a NaN one as "no verdict");
- ``has_verdict`` (bool), ``error_type`` (``""`` when none), ``env_name``;
- ``reward/<component>`` for each component asked for (a verdict without that component gives
  its score; no verdict gives ``no_verdict_score``).

Example:
    scorer = RowScorer(mixed, client, no_verdict_score=0.0)
    scorer.score(["```python\\n...```"], [{"env_name": "coin_change"}])
    # [{'score': 1.0, 'has_verdict': True, 'error_type': '', 'env_name': 'coin_change'}]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.completions import completion_to_code
from deepgym_ray.config import check_max_parallel
from deepgym_ray.models import Environment, RunResult
from deepgym_ray.reward import MaskedRate

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

__all__ = ["BASE_KEYS", "RowScorer", "row_scorer", "special_tokens_of"]

logger = logging.getLogger(__name__)

BASE_KEYS: tuple[str, ...] = ("score", "has_verdict", "error_type", "env_name")


class RowScorer:
    """Routes and scores rows; see the module docstring.

    ``env`` is an Environment (every row scores against it) or a MixedEnvironment (each row
    routed by its metadata); ``client`` a DeepGym client (default: the trainers' default client
    on the shared pool); ``components`` the reward components to report as extra keys;
    ``special_tokens`` a tokenizer's own special tokens, dropped around an answer besides the
    common ones (see :mod:`deepgym_ray.completions`).
    """

    def __init__(
        self,
        env: Any,
        client: DeepGym | None = None,
        *,
        max_parallel: int = 32,
        no_verdict_score: float = 0.0,
        components: Sequence[str] = (),
        special_tokens: Sequence[str] = (),
    ) -> None:
        if not isinstance(env, Environment) and not callable(getattr(env, "route_row", None)):
            raise TypeError(f"env must be an Environment or a MixedEnvironment, got "
                            f"{type(env).__name__}")
        if isinstance(no_verdict_score, bool) or not isinstance(no_verdict_score, (int, float)) \
                or math.isinf(no_verdict_score):
            raise ValueError(f"no_verdict_score must be a finite number or NaN, "
                             f"got {no_verdict_score!r}")
        if isinstance(components, str) or any(not isinstance(c, str) or not c
                                               for c in components):
            raise ValueError(f"components must be a list of component names, got {components!r}")
        if client is None:
            from deepgym_ray.client import default_client

            client = default_client()
        self.env = env
        self.client = client
        self.max_parallel = check_max_parallel(max_parallel)
        self.no_verdict_score = float(no_verdict_score)
        self.components = tuple(components)
        self.special_tokens = tuple(special_tokens)
        self.masked_rate = MaskedRate(name=f"deepgym/{getattr(env, 'name', 'rows')}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of every row's fields, in order."""
        return (*BASE_KEYS, *(f"reward/{c}" for c in self.components))

    def route(self, index: int, row: Mapping[str, Any]) -> Environment:
        """The environment of one row; ValueError naming the row when none matches."""
        if isinstance(self.env, Environment):
            return self.env
        return self.env.route_row(index, row)

    def score(
        self, completions: Sequence[Any], rows: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any] | ValueError]:
        """One entry per row, in order: its fields, or the ValueError that rejected that row
        (bad metadata or a malformed completion); the other rows are scored all the same."""
        if len(completions) != len(rows):
            raise ValueError(f"got {len(completions)} completions for {len(rows)} rows")
        out: list[dict[str, Any] | ValueError | None] = [None] * len(rows)
        todo: list[tuple[int, Environment, str]] = []
        for i, (completion, row) in enumerate(zip(completions, rows, strict=True)):
            try:  # the code is taken out here, once; only the code is sent
                env = self.route(i, row)
                todo.append((i, env, completion_to_code(completion, i, self.special_tokens,
                                                        env.answer_languages)))
            except (TypeError, ValueError) as exc:
                out[i] = exc if isinstance(exc, ValueError) else ValueError(str(exc))
        if todo:
            results = self.client.score_code([env for _, env, _ in todo],
                                             [code for _, _, code in todo],
                                             max_parallel=self.max_parallel)
            self.masked_rate.update(results)
            for (i, env, _), result in zip(todo, results, strict=True):
                out[i] = self.fields(result, env.name)
        return out  # type: ignore[return-value]

    def fields(self, result: RunResult, env_name: str) -> dict[str, Any]:
        """The fixed key set for one result."""
        from deepgym_ray.integrations.trl import reward_of

        judged = result.has_verdict
        fields: dict[str, Any] = {
            "score": float(result.reward) if judged else self.no_verdict_score,
            "has_verdict": bool(judged),
            "error_type": result.error_type or "",
            "env_name": env_name,
        }
        for component in self.components:
            value = reward_of(result, component)
            fields[f"reward/{component}"] = self.no_verdict_score if value is None else value
        return fields


def special_tokens_of(tokenizer: str) -> tuple[str, ...]:
    """Every special token of the Hugging Face tokenizer at ``tokenizer`` (a local folder, or a
    name in the local cache), added ones included; ValueError naming it when it cannot load."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ValueError("reading a tokenizer's special tokens needs transformers "
                         "(pip install 'deepgym_ray[trl]')") from None
    try:
        loaded = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot load the tokenizer {tokenizer!r}: {exc}") from None
    added = [t.content for t in loaded.added_tokens_decoder.values() if t.special]
    return tuple(dict.fromkeys([*loaded.all_special_tokens, *added]))


def row_scorer(env: Any = None, *, mixed: str | None = None, config: str | None = None,
               tokenizer: str | None = None, **options: Any) -> RowScorer:
    """A RowScorer from a service's or a trainer's settings: the mixture file ``mixed`` (its
    environments, and its DeepGymConfig) or ``env``; the DeepGymConfig file ``config``, when
    given, overrides the mixture's; ``tokenizer`` names the model's tokenizer, whose special
    tokens are dropped around answers. ``options`` go to RowScorer."""
    from pathlib import Path

    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig
    from deepgym_ray.reward.mixed_config import load_mixed_config

    client_config = None
    if mixed is not None:
        mixture = load_mixed_config(mixed)
        env = mixture.build()
        client_config = mixture.client_config(Path(mixed).parent)
    if config is not None:
        client_config = DeepGymConfig.from_yaml(config)
    client = None if client_config is None else DeepGym(config=client_config)
    if tokenizer is not None:
        options["special_tokens"] = special_tokens_of(tokenizer)
    return RowScorer(env, client, **options)
