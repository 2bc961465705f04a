"""GRPO with TRL on a mix of DeepGym environments, scored on a Ray pool of sandboxes.

Train a real model (needs it on disk or in the Hugging Face cache):

    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct \
        --env coin_change --env knapsack_01

Smoke-test the whole loop on any CPU in one to two minutes (90 s, 60 s of it CPU, measured on
a busy 2-core machine), with a tiny model and tokenizer built locally (nothing is downloaded).
The tiny model is first taught the reference answers for 150 seeded steps (its loss is near 0
after about 100), so some of its sampled completions are right and the logged reward is above
0. Everything it writes goes to a temporary folder that is removed at the end:

    python examples/trl_grpo.py --tiny

Each dataset row carries an ``env_name`` column, so the one reward function routes every
completion to its own environment. Completions whose sandbox failed get None (no verdict) and
TRL leaves them out of their group's baseline; the rate shows up as ``deepgym/no_verdict_rate``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import tempfile
from pathlib import Path

DEFAULT_ENVS = ["knapsack_01", "max_subarray_sum"]
# --tiny: environments whose reference answers are short enough for a tiny model to learn.
TINY_ENVS = ["max_subarray_sum", "prime_factors"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a model name or path for from_pretrained")
    which.add_argument("--tiny", action="store_true",
                       help="build a tiny model locally and train on the CPU")
    parser.add_argument("--env", action="append", dest="envs",
                        help=f"an environment (repeatable; default: {' '.join(DEFAULT_ENVS)}, "
                             f"with --tiny {' '.join(TINY_ENVS)})")
    parser.add_argument("--mode", default="auto", choices=["auto", "local", "docker", "daytona"],
                        help="sandbox provider (auto: Daytona when DAYTONA_API_KEY is set)")
    parser.add_argument("--rows", type=int, default=64, help="dataset rows to draw")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8,
                        help="completions per device per step (a multiple of num-generations)")
    parser.add_argument("--max-completion-length", type=int, default=None)
    parser.add_argument("--max-parallel", type=int, default=32, help="sandbox runs in flight")
    parser.add_argument("--output-dir", default=None,
                        help="keep the run's files here (default: a temporary folder, removed)")
    parser.add_argument("--teach-steps", type=int, default=150,
                        help="--tiny: steps teaching the tiny model the reference answers")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from deepgym_ray import DeepGym, MixedEnvironment
    from deepgym_ray.integrations.trl import make_trl_reward_fn
    from deepgym_ray.suites import load_environment

    names = args.envs or (TINY_ENVS if args.tiny else DEFAULT_ENVS)
    mixed = MixedEnvironment(environments=[(load_environment(n), 1.0) for n in names])
    dataset = Dataset.from_list(mixed.sample_batch(args.rows, seed=args.seed))
    reward_fn = make_trl_reward_fn(mixed, DeepGym(mode=args.mode), max_parallel=args.max_parallel)

    with contextlib.ExitStack() as cleanup:
        if args.output_dir:
            workdir = Path(args.output_dir)
        else:  # removed when the run ends, however it ends
            workdir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(
                prefix="deepgym-grpo-")))
        model, completion_length = args.model, args.max_completion_length or 512
        if args.tiny:
            model, answer_length = _tiny_model(workdir, mixed.environments, args)
            completion_length = args.max_completion_length or answer_length + 16
        config = GRPOConfig(
            output_dir=str(workdir / "run"),
            num_generations=args.num_generations,
            per_device_train_batch_size=args.batch_size,
            max_completion_length=completion_length,
            max_steps=args.steps or (4 if args.tiny else -1),
            logging_steps=1,
            learning_rate=1e-4 if args.tiny else 1e-6,
            use_cpu=args.tiny,
            save_strategy="no",
            report_to=[],
            seed=args.seed,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=[reward_fn], args=config,
                              train_dataset=dataset)
        trainer.train()
    history = [h for h in trainer.state.log_history if "deepgym/no_verdict_rate" in h]
    for entry in history:
        logging.info("step %s: reward %.3f, no verdict %.0f%%", entry.get("step"),
                     entry.get("reward", float("nan")), 100 * entry["deepgym/no_verdict_rate"])
    return history


def _tiny_model(workdir: Path, environments: list, args: argparse.Namespace) -> tuple[str, int]:
    """A tiny model taught each environment's reference answer; (its path, answer tokens)."""
    from transformers import AutoTokenizer

    from deepgym_ray.integrations.tiny import build_tiny_model, teach_tiny_model

    pairs = [(env.task, f"```python\n{env.reference_solution}```") for env in environments]
    path = build_tiny_model(workdir / "tiny-model", seed=args.seed,
                            texts=[text for pair in pairs for text in pair])
    teach_tiny_model(path, pairs, steps=args.teach_steps, seed=args.seed)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return str(path), max(len(tokenizer(answer).input_ids) for _, answer in pairs)

if __name__ == "__main__":
    main()
