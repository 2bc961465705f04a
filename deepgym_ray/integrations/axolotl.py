"""Axolotl's GRPO (``rl: grpo``) rewarded on the shared pool.

Axolotl loads reward functions by dotted path (``trl.reward_funcs``) and calls them as TRL does,
every dataset column a list aligned with the completions. :func:`row_reward_fn` is such a
function for rows in verl's layout (``prompt``, ``data_source``, ``extra_info``, as
:func:`~deepgym_ray.integrations.verl.write_verl_parquet` writes them): each row is routed to
the environment named by ``extra_info['environment']`` (or ``env_name`` /
``environment_name``), else by ``data_source``, loaded by name on first use (a built-in, a
suite member such as ``humaneval/3``, a folder), and scored on the shared Ray pool. A
completion without a verdict gets None, which TRL leaves out of its group's baseline; a row
that names no environment fails the batch with its index and metadata.

The scoring client is the trainers' default client: the DeepGymConfig YAML (provider, pool)
that ``DEEPGYM_CONFIG`` names in the trainer's environment, else ``mode='auto'``.

:func:`generate_axolotl_config` writes a GRPO config that uses it.

Example:
    generate_axolotl_config("grpo.yaml", base_model="Qwen/Qwen2.5-0.5B-Instruct",
                            dataset="train.parquet")
    # then: axolotl train grpo.yaml
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deepgym_ray.models import Environment

__all__ = ["REWARD_FUNCTION", "EnvironmentByName", "generate_axolotl_config", "row_reward_fn"]

REWARD_FUNCTION = "deepgym_ray.integrations.axolotl.row_reward_fn"
NAME_KEYS: tuple[str, ...] = ("environment", "env_name", "environment_name")

_REWARD_FN: dict[int, Any] = {}  # by id(client): default clients live for the process
_LOCK = threading.Lock()


class EnvironmentByName:
    """Routes each row to the environment its metadata names (``NAME_KEYS`` in
    ``extra_info`` or as columns, else ``data_source``), each loaded once."""

    name = "axolotl"

    def __init__(self) -> None:
        self._loaded: dict[str, Environment] = {}
        self._lock = threading.Lock()

    def route(self, completions: Sequence[Any], data_source: Any = None,
              extra_info: Any = None, **columns: Any) -> list[Environment]:
        n = len(completions)
        return [self._environment(i, self._name(i, _at(data_source, i, n),
                                                _at(extra_info, i, n), columns, n))
                for i in range(n)]

    @staticmethod
    def _name(index: int, source: Any, info: Any, columns: Mapping[str, Any], n: int) -> str:
        info = info if isinstance(info, Mapping) else {}
        for key in NAME_KEYS:
            value = info.get(key)
            if value in (None, "") and key in columns:
                value = _at(columns[key], index, n)
            if value not in (None, ""):
                return str(value)
        if source not in (None, ""):
            return str(source)
        raise ValueError(f"completion {index}: its row names no environment (looked at "
                         f"extra_info[{' / '.join(NAME_KEYS)}] and data_source; got "
                         f"data_source={source!r}, extra_info={dict(info)!r})")

    def _environment(self, index: int, name: str) -> Environment:
        with self._lock:
            env = self._loaded.get(name)
        if env is not None:
            return env
        from deepgym_ray.suites import resolve_environments

        try:
            found = resolve_environments(name)
        except (LookupError, ValueError, OSError) as exc:
            raise ValueError(f"completion {index}: no environment {name!r}: {exc}") from None
        if len(found) != 1:
            raise ValueError(f"completion {index}: {name!r} names {len(found)} environments (a "
                             f"suite); name one member in extra_info['environment']")
        with self._lock:
            return self._loaded.setdefault(name, found[0])


def _at(column: Any, index: int, n: int) -> Any:
    """Row ``index`` of a column TRL passed (a list per batch), None when there is none."""
    if column is None:
        return None
    if isinstance(column, (str, bytes, Mapping)) or not isinstance(column, Sequence):
        raise ValueError(f"a routing column must be a list with one value per completion, "
                         f"got {type(column).__name__}")
    if len(column) != n:
        raise ValueError(f"a routing column has {len(column)} values for {n} completions")
    return column[index]


def _reward_fn() -> Any:
    """This process's reward function, on the default client (``DEEPGYM_CONFIG``'s, if set)."""
    from deepgym_ray.client import default_client

    client = default_client()
    with _LOCK:
        fn = _REWARD_FN.get(id(client))
        if fn is None:
            from deepgym_ray.integrations.trl import make_trl_reward_fn

            fn = _REWARD_FN[id(client)] = make_trl_reward_fn(EnvironmentByName(), client,
                                                             max_parallel=64)
        return fn


def row_reward_fn(completions: Sequence[Any], data_source: Sequence[Any] | None = None,
                  extra_info: Sequence[Any] | None = None, **kw: Any) -> list[float | None]:
    """Axolotl's (and TRL's) reward function for verl-layout rows; see the module docstring.
    One reward per completion, None where there was no verdict."""
    return _reward_fn()(completions, data_source=data_source, extra_info=extra_info, **kw)


def generate_axolotl_config(
    path: str | Path,
    *,
    base_model: str,
    dataset: str | Path,
    output_dir: str = "./outputs/deepgym-grpo",
    num_generations: int = 8,
    max_completion_length: int = 512,
    max_steps: int = 100,
    learning_rate: float = 1e-6,
    micro_batch_size: int = 8,
    use_vllm: bool = False,
    **overrides: Any,
) -> Path:
    """Write an Axolotl GRPO config at ``path`` that rewards with :func:`row_reward_fn`.

    ``dataset``: a Parquet or JSONL file of rows in verl's layout (``prompt`` as a chat,
    ``data_source``, ``extra_info``), used as it is (no prompt transform). ``overrides`` are
    top-level Axolotl settings set or replaced as given (``trl=`` replaces the TRL section).
    Set ``DEEPGYM_CONFIG`` in the trainer's environment to pick the provider. Returns ``path``.
    """
    import yaml

    if isinstance(num_generations, bool) or not isinstance(num_generations, int) \
            or num_generations < 2:
        raise ValueError(f"num_generations must be an integer of at least 2 (GRPO compares "
                         f"a prompt's generations), got {num_generations!r}")
    data = Path(dataset)
    if data.suffix not in (".parquet", ".jsonl", ".json"):
        raise ValueError(f"dataset must be a .parquet or .jsonl file, got {dataset!s}")
    config: dict[str, Any] = {
        "base_model": base_model,
        "rl": "grpo",
        "chat_template": "tokenizer_default",
        "datasets": [{"path": str(data), "split": "train",
                      "ds_type": "parquet" if data.suffix == ".parquet" else "json"}],
        "skip_prepare_dataset": True,
        "val_set_size": 0.0,
        "trl": {
            "reward_funcs": [REWARD_FUNCTION],
            "num_generations": num_generations,
            "max_completion_length": max_completion_length,
            "use_vllm": use_vllm,
        },
        "sequence_len": max_completion_length * 2,
        "micro_batch_size": micro_batch_size,
        "gradient_accumulation_steps": 1,
        "max_steps": max_steps,
        "learning_rate": learning_rate,
        "optimizer": "adamw_torch",
        "lr_scheduler": "cosine",
        "output_dir": output_dir,
        "logging_steps": 1,
    }
    config.update(overrides)
    batch = config["micro_batch_size"] * config["gradient_accumulation_steps"]
    if batch % num_generations:
        raise ValueError(f"micro_batch_size x gradient_accumulation_steps ({batch}) must be a "
                         f"multiple of num_generations ({num_generations}): TRL scores a "
                         f"prompt's generations together")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# GRPO rewarded in sandboxes by deepgym_ray ({REWARD_FUNCTION}).\n"
              f"# Pick the provider with DEEPGYM_CONFIG=<a DeepGymConfig YAML> in the "
              f"trainer's environment.\n")
    path.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path
