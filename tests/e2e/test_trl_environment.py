"""A real TRL GRPOTrainer with ``environment_factory=make_trl_environment(env)``: a tiny model
built here, with Qwen2.5's tool-calling chat template (shipped with TRL), taught to call the
``run_bash`` tool. TRL's own tool loop calls our tools, each call a step of an agent episode in
the local sandbox, and ``get_reward`` scores the episode: the right call earns 1.0."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from helpers.episodes import answer_env

pytestmark = pytest.mark.e2e

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
pytest.importorskip("jmespath")

TASK = "Write 42 to answer.txt."
CALL = {"name": "run_bash", "arguments": {"command": "echo 42 > answer.txt"}}

def test_grpo_trainer_runs_agent_episodes_through_its_tool_loop(tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import add_response_schema

    from deepgym_ray.integrations.tiny import build_tiny_model, teach_tiny_model
    from deepgym_ray.integrations.trl_env import make_trl_environment
    env = answer_env(task=TASK, max_steps=4, files={})
    Episode = make_trl_environment(env)
    assert pickle.loads(pickle.dumps(Episode)) is Episode  # for TRL's async trainer, and Ray

    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    model = build_tiny_model(tmp_path / "model", texts=[TASK, json.dumps(CALL)],
                             chat_template=template,
                             special_tokens=["<tool_call>", "</tool_call>"])
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(model))
    # Teach it the tool call for the prompt exactly as TRL renders it: the row's message with
    # reset()'s observation appended, and the environment's tools in the system prompt.
    probe = Episode()
    observation = probe.reset(prompt=[{"role": "user", "content": TASK}])
    probe.get_reward()
    tools = [probe.run_bash, probe.run_python, probe.write_file]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": TASK + observation}], tools=tools,
        add_generation_prompt=True, tokenize=False)
    answer = f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
    teach_tiny_model(model, [(prompt, answer)], steps=60)

    dataset = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": TASK}]}] * 4)
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1,
                      per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=64, max_tool_calling_iterations=1,
                      temperature=0.05, learning_rate=1e-4, logging_steps=1, use_cpu=True,
                      save_strategy="no", report_to=[], seed=0)
    trainer = GRPOTrainer(model=str(model), args=args, train_dataset=dataset,
                          processing_class=tokenizer, environment_factory=Episode)
    trainer.train()

    assert trainer.state.global_step == 1
    instances = trainer._environment_pool[None]
    episodes = [i._session for i in instances if i._session is not None]
    assert len(episodes) == 4
    called = [e for e in episodes
              if [s.action.content for s in e.trajectory.steps] == ["echo 42 > answer.txt"]]
    assert called, [e.trajectory.steps for e in episodes]
    for episode in called:  # TRL's tool call ran in the sandbox, and the episode was judged
        assert episode.result is not None and episode.result.score == 1.0
    logged = [h for h in trainer.state.log_history if f"rewards/{Episode.__name__}/mean" in h]
    assert logged and logged[0][f"rewards/{Episode.__name__}/mean"] > 0
    for instance in instances:
        instance._release("the test is over")  # (all were scored: nothing to abandon)
