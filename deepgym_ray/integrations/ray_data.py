"""Score a Ray Dataset of completions at dataset scale: rejection sampling, filtering millions
of generated solutions, offline evaluation of a checkpoint.

:func:`score_dataset` adds a verdict to every row of a dataset, lazily, as a Ray Data
``map_batches`` stage: a few light scoring actors each send two batches at a time to the shared
verifier pool (the one ``DeepGym`` uses on this cluster) and append its columns. Ray Data
streams the blocks through it, so nothing holds the whole dataset, and the stage's actors are
its backpressure: at most ``2 * concurrency`` batches (each at most ``max_parallel`` runs at
once) are being scored at any moment, whatever the dataset's size.

Columns added:

- ``reward`` (float): the score, null without a verdict (an outage is never a 0);
- ``has_verdict`` (bool);
- ``error_type`` (string, ``""`` when none);
- ``details`` (string), with ``details=True``.

A row that cannot be scored (its metadata names no environment, its completion is no
completion at all - a number, bytes, a list of numbers - or a conversation with no answer)
gets no verdict, an error type, and, with ``details=True``, why; the other rows are scored all
the same. A row whose answer is None is the model's judged 0.

Arrow gives a column one type per block: a column that holds strings in some blocks and
conversations (or numbers) in others cannot be put in one batch, and Ray Data fails the
dataset with ``ArrowTypeError: Unable to merge`` before any row reaches the scorer; give the
column one type first (``ds.map(...)``), or read the files with one schema. Within a block
whose values Arrow keeps as Python objects, each row is taken as it is.

Example:
    >>> import ray  # doctest: +SKIP
    >>> ds = ray.data.read_parquet("generations/")  # doctest: +SKIP
    >>> scored = score_dataset(ds, "coin_change")  # doctest: +SKIP
    >>> scored.filter(expr="reward == 1.0").write_parquet("accepted/")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deepgym_ray.completions import check_completion
from deepgym_ray.config import DeepGymConfig, check_max_parallel
from deepgym_ray.exceptions import error_type_for
from deepgym_ray.models import Environment, RunResult

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow
    import ray.data

__all__ = ["RESULT_COLUMNS", "score_dataset"]

RESULT_COLUMNS: tuple[str, ...] = ("reward", "has_verdict", "error_type")


def score_dataset(
    ds: ray.data.Dataset,
    env_or_mixed: Any,
    completion_column: str = "completion",
    *,
    config: DeepGymConfig | None = None,
    provider: Any = None,
    details: bool = False,
    max_parallel: int = 64,
    batch_size: int = 256,
    concurrency: int = 2,
    num_cpus: float = 0.1,
) -> ray.data.Dataset:
    """``ds`` with a verdict for each row (see the module docstring), as a lazy dataset.

    ``env_or_mixed``: an Environment or its name (every row scores against it), or a
    MixedEnvironment (each row routed by its own metadata columns, as for verl's rows).
    ``completion_column``: the model's outputs (a string, or a conversation as a list of chat
    messages). ``config``: the client's settings (default: ``mode='auto'``, resolved here, on
    the shared Ray pool); ``provider``: a ready provider or a zero-argument factory of one, as
    ``DeepGym`` takes (picklable: the scoring actors make their clients with it).
    ``max_parallel``: runs at once per batch; ``batch_size``: rows per
    batch; ``concurrency``: at most this many scoring actors (of ``num_cpus``
    each, two batches at a time each).
    """
    env = _environment(env_or_mixed)
    if not isinstance(completion_column, str) or not completion_column:
        raise ValueError(f"completion_column must be a column name, got {completion_column!r}")
    for name, value in (("batch_size", batch_size), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    check_max_parallel(max_parallel)
    columns = ds.schema().names
    if completion_column not in columns:
        raise ValueError(f"the dataset has no column {completion_column!r}; its columns are "
                         f"{columns}")
    taken = [c for c in (*RESULT_COLUMNS, "details") if c in columns
             and (c != "details" or details)]
    if taken:
        raise ValueError(f"the dataset already has column(s) {taken}, which scoring adds; "
                         f"rename them first (Dataset.rename_columns)")
    import ray.data

    if config is None:
        from deepgym_ray.sandboxes import resolve_mode

        # Decided once, here: every scoring actor then uses the same provider, and a missing
        # SDK is warned about once, on the driver.
        config = DeepGymConfig(mode=resolve_mode("auto"), backend="ray")
    elif config.backend != "ray":
        config = config.model_copy(update={"backend": "ray"})
    if provider is None:
        from deepgym_ray.sandboxes import check_mode

        # A mode that cannot run here fails now, in one line, not in every scoring actor.
        check_mode(config.mode, **config.provider_options)
    return ds.map_batches(
        _BatchScorer,
        fn_constructor_kwargs={"env": env, "config": config, "provider": provider,
                               "column": completion_column, "details": details,
                               "max_parallel": max_parallel},
        batch_size=batch_size, batch_format="pyarrow", zero_copy_batch=True,
        # From one scoring actor up to ``concurrency``, as the dataset's blocks allow (a small
        # dataset starts no actor it cannot feed), each scoring two batches at once: the next
        # batch's runs start while the last runs of the one before finish.
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=concurrency,
                                           max_concurrent_calls_per_actor=2,
                                           enable_true_multi_threading=True),
        num_cpus=num_cpus, udf_modifying_row_count=False)


def _environment(env: Any) -> Any:
    if isinstance(env, str):
        from deepgym_ray.suites import load_environment

        return load_environment(env)
    if isinstance(env, Environment) or callable(getattr(env, "route_row", None)):
        return env
    raise TypeError(f"env_or_mixed must be an Environment, its name or a MixedEnvironment, "
                    f"got {type(env).__name__}")


class _BatchScorer:
    """One scoring actor of the stage: a client on the shared pool, one batch at a time."""

    def __init__(self, env: Any, config: DeepGymConfig, provider: Any, column: str,
                 details: bool, max_parallel: int) -> None:
        from deepgym_ray.client import DeepGym
        from deepgym_ray.reward import MaskedRate

        self.env, self.column, self.details = env, column, details
        self.max_parallel = max_parallel
        self.client = DeepGym(config=config, provider=provider, check=False)  # checked above
        self.masked_rate = MaskedRate(name=f"deepgym/{getattr(env, 'name', 'dataset')}")

    def __call__(self, batch: pyarrow.Table) -> pyarrow.Table:
        import pyarrow as pa

        completions = batch.column(self.column).to_pylist()
        results: list[RunResult | None] = [None] * len(completions)
        routed: list[tuple[int, Environment]] = []
        rows = None if isinstance(self.env, Environment) else batch.to_pylist()
        for i in range(len(completions)):
            try:
                env = self.env if rows is None else self.env.route_row(i, rows[i])
            except (TypeError, ValueError) as exc:
                results[i] = RunResult(error_type=error_type_for(exc),
                                       details=f"not routed: {exc}")
                continue
            try:  # a value that is no completion is this row's error, not the batch's
                check_completion(completions[i], f"row {i} of the batch: the completion")
            except TypeError as exc:
                results[i] = RunResult(error_type=error_type_for(exc), env_name=env.name,
                                       details=f"not scored: {exc}")
                continue
            routed.append((i, env))
        if routed:
            scored = self.client.score_outputs([env for _, env in routed],
                                               [completions[i] for i, _ in routed],
                                               self.max_parallel)
            self.masked_rate.update(scored)
            for (i, _), result in zip(routed, scored, strict=True):
                results[i] = result
        done: Sequence[RunResult] = results  # type: ignore[assignment]
        batch = batch.append_column("reward", pa.array(
            [_reward(r) for r in done], type=pa.float64()))
        batch = batch.append_column("has_verdict", pa.array(
            [bool(r.has_verdict) for r in done], type=pa.bool_()))
        batch = batch.append_column("error_type", pa.array(
            [r.error_type or "" for r in done], type=pa.string()))
        if self.details:
            batch = batch.append_column("details", pa.array(
                [str(r.details or "") for r in done], type=pa.string()))
        return batch


def _reward(result: RunResult) -> float | None:
    if not result.has_verdict or result.reward is None or math.isnan(result.reward):
        return None
    return float(result.reward)
