"""Axolotl's GRPO: the config ``generate_axolotl_config`` writes, validated by Axolotl 0.19's own
schema, and ``row_reward_fn`` loaded by its dotted path as Axolotl loads reward functions and
called as TRL calls them, on verl-layout rows read back from Parquet, scored on a Ray pool.

Axolotl 0.19 (the newest for Python 3.11) cannot live in our environment: it pins trl 1.9 (its
trainers import ``trl.experimental.prm``, which trl 1.16 no longer has), datasets 4.x and older
pydantic and numpy. ``scripts/setup.sh`` puts its own code, without its dependencies, in
``.venv/axolotl``; its configuration schema imports from there beside our pins, in a process of
its own. Its trainer module does not import, so its reward loader is taken out of its source.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.cli import make_outage_env

from deepgym_ray.integrations.axolotl import (
    REWARD_FUNCTION,
    generate_axolotl_config,
    row_reward_fn,
)

AXOLOTL_SITE = Path(sys.prefix) / "axolotl"

# Each file's validated settings, or the error Axolotl's validation raised for it.
VALIDATE = """
import json, sys, yaml
from axolotl.utils.config import validate_config
from axolotl.utils.dict import DictDefault
for path in sys.argv[1:]:
    try:
        cfg = validate_config(DictDefault(yaml.safe_load(open(path))))
    except Exception as exc:
        print(json.dumps({"error": repr(exc)}))
        continue
    print(json.dumps({"rl": cfg.rl.value, "reward_funcs": cfg.trl.reward_funcs,
                      "num_generations": cfg.trl.num_generations,
                      "datasets": [{"path": d.path, "ds_type": d.ds_type} for d in cfg.datasets]}))
"""


def axolotl_get_reward_func():
    """Axolotl's own ``GRPOStrategy.get_reward_func``, taken from its installed source: its
    trainer module cannot be imported beside trl 1.16, the function itself needs nothing of it
    but importlib and inspect (and, for a reward model's path, os and its logger)."""
    if not (AXOLOTL_SITE / "axolotl").is_dir():
        pytest.skip(f"Axolotl's code is not in {AXOLOTL_SITE} (scripts/setup.sh puts it there)")
    path = AXOLOTL_SITE / "axolotl" / "core" / "trainers" / "grpo" / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    [strategy] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GRPOStrategy"]
    [method] = [n for n in strategy.body
                if isinstance(n, ast.FunctionDef) and n.name == "get_reward_func"]
    method.decorator_list = []  # a classmethod there: ``cls`` is not used
    namespace = {"importlib": importlib, "inspect": inspect, "os": os, "RewardFunc": object,
                 "LOG": logging.getLogger("axolotl")}
    exec(compile(ast.Module(body=[method], type_ignores=[]), str(path), "exec"), namespace)
    return functools.partial(namespace["get_reward_func"], None)


@pytest.mark.slow
def test_the_generated_config_passes_axolotl_s_own_validation(tmp_path):
    get_reward_func = axolotl_get_reward_func()
    path = generate_axolotl_config(tmp_path / "grpo.yaml", base_model=str(tmp_path / "model"),
                                   dataset=tmp_path / "train.parquet", num_generations=4,
                                   micro_batch_size=4)
    # A broken copy must be refused by the same validation (so the check can fail).
    broken = yaml.safe_load(path.read_text())
    broken["rl"] = "grpo_with_typo"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    env = {**os.environ, "PYTHONPATH": str(AXOLOTL_SITE), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", VALIDATE, str(path),
                           str(tmp_path / "broken.yaml")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    cfg, refused = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert cfg == {"rl": "grpo", "reward_funcs": [REWARD_FUNCTION], "num_generations": 4,
                   "datasets": [{"path": str(tmp_path / "train.parquet"),
                                 "ds_type": "parquet"}]}
    assert "grpo_with_typo" in refused["error"], refused
    assert get_reward_func(cfg["reward_funcs"][0]) is row_reward_fn


def _trl_call(reward, rows, completions):
    """Call ``reward`` as TRL's GRPOTrainer does: every column but the prompt as a list,
    conversational completions, and its own keyword arguments."""
    logged = {}
    columns = {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}
    rewards = reward(prompts=[row["prompt"] for row in rows],
                     completions=[[{"role": "assistant", "content": c}] for c in completions],
                     completion_ids=[[1, 2, 3] for _ in completions], trainer_state=None,
                     log_metric=logged.__setitem__, log_extra=logged.__setitem__, **columns)
    return rewards, logged


@pytest.mark.slow
def test_rows_are_routed_by_their_metadata_and_scored(tmp_path, pool_config_file, monkeypatch):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deepgym_ray.suites import load_environment
    from deepgym_ray.suites.humaneval import load_problem

    monkeypatch.setenv("DEEPGYM_CONFIG", pool_config_file)
    outage = make_outage_env(tmp_path / "outage")
    rows = [
        {"data_source": "coin_change", "extra_info": {"environment": "coin_change"}},
        {"data_source": "fibonacci_mod", "extra_info": {"split": "train"}},
        {"data_source": "humaneval", "extra_info": {"environment": "humaneval/2"}},
        {"data_source": "mine", "extra_info": {"environment": str(outage)}},
    ]
    rows = [{"prompt": [{"role": "user", "content": "Solve it."}], **row} for row in rows]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    # As Axolotl loads a local Parquet file (datasets' parquet builder, the train split).
    read = datasets.load_dataset("parquet", data_files=str(tmp_path / "train.parquet"),
                                 split="train").to_list()
    problem = load_problem("HumanEval/2")
    completions = [
        f"```python\n{load_environment('coin_change').reference_solution}\n```",
        "```python\nanswer = None\n```",
        f"```python\n{problem['prompt']}{problem['canonical_solution']}```",
        "print(1)",
    ]

    rewards, logged = _trl_call(axolotl_get_reward_func()(REWARD_FUNCTION), read, completions)

    assert rewards == [1.0, 0.0, 1.0, None]  # the outage is no verdict, never a 0
    assert logged["deepgym/no_verdict_rate"] == 0.25
    assert logged["error_type"][3] == "verifier_error"


def test_a_row_that_names_no_single_environment_fails_its_batch_by_name(pool_config_file,
                                                                        monkeypatch):
    monkeypatch.setenv("DEEPGYM_CONFIG", pool_config_file)
    suite = [{"prompt": "p", "data_source": "humaneval", "extra_info": {"split": "train"}}]
    with pytest.raises(ValueError, match=r"completion 0: 'humaneval' names 164 environments"):
        _trl_call(row_reward_fn, suite, ["print(1)"])
    nameless = [{"prompt": "p", "data_source": None, "extra_info": {"index": 3}}]
    with pytest.raises(ValueError, match=r"completion 0: its row names no environment"):
        _trl_call(row_reward_fn, nameless, ["print(1)"])
    unknown = [{"prompt": "p", "data_source": "x", "extra_info": {"environment": "no_such"}}]
    with pytest.raises(ValueError, match=r"no environment 'no_such'"):
        _trl_call(row_reward_fn, unknown, ["print(1)"])


def test_bad_config_settings_are_named(tmp_path):
    with pytest.raises(ValueError, match="num_generations"):
        generate_axolotl_config(tmp_path / "a.yaml", base_model="m", dataset="d.parquet",
                                num_generations=1)
    with pytest.raises(ValueError, match="multiple of num_generations"):
        generate_axolotl_config(tmp_path / "a.yaml", base_model="m", dataset="d.parquet",
                                num_generations=8, micro_batch_size=6)
    with pytest.raises(ValueError, match=r"\.parquet or \.jsonl"):
        generate_axolotl_config(tmp_path / "a.yaml", base_model="m", dataset="d.csv")
