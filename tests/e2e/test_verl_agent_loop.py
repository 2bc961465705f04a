"""verl 0.9's own multi-turn machinery running ``deepgym_agent``: the agent loop is made from
verl's registry by verl's ``hydra.utils.instantiate`` call, the tools from our tool config by
verl's ``initialize_tools_from_config``, tool calls are parsed by verl's hermes parser and run by
verl's ``ToolAgentLoop``. Only the inference server is a scripted stand-in (it cannot run here):
it answers each generation with the next text of a script, as token ids."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

verl = pytest.importorskip("verl")
trl = pytest.importorskip("trl")  # (its Qwen2.5 chat template, for the tiny tokenizer)

from omegaconf import OmegaConf  # noqa: E402


def _call(name: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


REPORT = ("import csv, json\ntotals = {}\n"
          "for row in csv.DictReader(open('data/sales.csv')):\n"
          "    totals[row['region']] = totals.get(row['region'], 0) + float(row['amount'])\n"
          "report = {k: round(v, 2) for k, v in totals.items()}\n"
          "report['_all'] = round(sum(totals.values()), 2)\n"
          "json.dump(report, open('report.json', 'w'))\n")
RIGHT = [_call("write_file", path="report.py", content=REPORT),
         _call("run_bash", command="python3 report.py && cat report.json"),
         "The report is written."]
LAZY = ["I will not do it."]


class ScriptedServer:
    """Stands in for verl's LLM server client: each generation is the next scripted text."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.prompts = tokenizer, list(script), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = self.script.pop(0) + "<|im_end|>"
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False),
                           stop_reason="completed")


def _tokenizer(tmp_path):
    from transformers import AutoTokenizer

    from deepgym_ray.integrations.tiny import build_tiny_model

    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    path = build_tiny_model(tmp_path / "model", texts=[REPORT, *RIGHT], chat_template=template,
                            special_tokens=["<tool_call>", "</tool_call>"])
    return AutoTokenizer.from_pretrained(path)


def _config():
    config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__),
                                         "trainer/config/_generated_ppo_trainer.yaml"))
    rollout = config.actor_rollout_ref.rollout
    rollout.prompt_length, rollout.response_length = 2048, 2048
    rollout.multi_turn.format = "hermes"
    rollout.multi_turn.max_assistant_turns = 4
    return config


def _run(tokenizer, tools, script, env_name):
    import hydra
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        ToolListWrap,
        _agent_loop_registry,
    )

    from deepgym_ray.integrations.verl_agent import AGENT_NAME

    config = _config()
    server = ScriptedServer(tokenizer, script)
    loop = hydra.utils.instantiate(  # as verl's AgentLoopWorker makes it
        config=_agent_loop_registry[AGENT_NAME], trainer_config=DictConfigWrap(config=config),
        server_manager=server, tokenizer=tokenizer, processor=None, hf_model_type=None,
        dataset_cls=None, data_config=DictConfigWrap(config.data), tools=ToolListWrap(tools))
    # verl runs the loop on the event loop the agent loop took when made (``self.loop``).
    output = loop.loop.run_until_complete(loop.run(
        {"temperature": 1.0}, raw_prompt=[{"role": "user", "content": "Do the task."}],
        extra_info={"env_name": env_name}, tools_kwargs={}))
    return output, server


def test_deepgym_agent_in_verls_tool_loop(tmp_path):
    from verl.tools.tool_registry import initialize_tools_from_config

    from deepgym_ray.integrations.verl_agent import write_tool_config

    tokenizer = _tokenizer(tmp_path)
    tools = initialize_tools_from_config(str(write_tool_config(tmp_path / "tools.yaml")))
    assert [t.name for t in tools] == ["run_bash", "run_python", "write_file"]

    right, server = _run(tokenizer, tools, RIGHT, "sales_report")
    assert "data/sales.csv" in server.prompts[0]  # the first observation reached the prompt
    assert '"_all": 655.75' in server.prompts[-1]  # the tool's output came back to the model
    assert right.reward_score == 1.0
    assert right.extra_fields["reward_extra_info"] == {
        "score": 1.0, "has_verdict": True, "error_type": "", "env_name": "sales_report"}
    assert 1 in right.response_mask and 0 in right.response_mask  # tool output is not trained

    lazy, _ = _run(tokenizer, tools, LAZY, "sales_report")
    assert lazy.reward_score == 0.0 and lazy.extra_fields["reward_extra_info"]["has_verdict"]
    assert set(lazy.response_mask) == {1}

    # An environment whose verifier never judges: the episode is left out of the update.
    folder = tmp_path / "outage"
    folder.mkdir()
    (folder / "verifier.py").write_text("import sys\nsys.exit(2)\n")
    (folder / "metadata.json").write_text(json.dumps({"type": "multi-turn"}))
    outage, _ = _run(tokenizer, tools, [_call("run_bash", command="true"), "done"], str(folder))
    info = outage.extra_fields["reward_extra_info"]
    assert math.isnan(outage.reward_score) and info["has_verdict"] is False
    assert info["error_type"] == "verifier_error" and set(info) == set(right.extra_fields[
        "reward_extra_info"])
    assert set(outage.response_mask) == {0}
