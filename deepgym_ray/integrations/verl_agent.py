"""Agent episodes in verl's multi-turn rollout: the ``deepgym_agent`` agent loop and its tools.

Point verl at them::

    actor_rollout_ref.rollout.multi_turn:
      enable: true
      format: hermes                          # the model's tool-call format
      tool_config_path: deepgym_tools.yaml    # TOOLS_CONFIG below, written by write_tool_config
    # each row: agent_name: deepgym_agent, extra_info: {env_name: fix_the_calculator}

and have verl's workers import this module, which registers the loop:
``VERL_USE_EXTERNAL_MODULES=deepgym_ray.integrations.verl_agent`` (or an agent loop config whose
``_target_`` is ``deepgym_ray.integrations.verl_agent.DeepGymAgentLoop``). The package's verl
plugin does not import it: verl loads that plugin while it is still being imported itself.

:class:`DeepGymAgentLoop` (registered as ``deepgym_agent``, a subclass of verl's own
``ToolAgentLoop``) opens one session per trajectory on the row's multi-turn environment (its
``extra_info.env_name``, or ``data_source``), appends the first observation to the prompt, runs
verl's tool loop unchanged, then scores the episode: ``reward_score`` is the verifier's score,
and ``reward_extra_info`` has the same keys every time (``score``, ``has_verdict``,
``error_type``, ``env_name``). An episode without a verdict is left out of the update: its
response mask is zeroed (no token of it is trained on) and its score is ``no_verdict_score``
(NaN by default, which the judged-only estimator ``deepgym_grpo_judged`` leaves out of its
group's baseline).

:class:`DeepGymTool` is a verl ``BaseTool``: one per action (``run_bash``, ``run_python``,
``write_file``), each call a step of the trajectory's session, which the loop hands it through
``tools_kwargs``.

Example:
    write_tool_config("deepgym_tools.yaml")
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from deepgym_ray.models import Environment, RunResult
from deepgym_ray.sessions import Action

__all__ = ["AGENT_NAME", "TOOLS", "DeepGymAgentLoop", "DeepGymTool", "write_tool_config"]

logger = logging.getLogger(__name__)

AGENT_NAME = "deepgym_agent"
SESSION_KEY = "deepgym_session"  # where the loop hands the session to the tools
EXTRA_KEYS = ("score", "has_verdict", "error_type", "env_name")

# name -> (action type, description, parameters: name -> description)
TOOLS: dict[str, tuple[str, str, dict[str, str]]] = {
    "run_bash": ("bash", "Run a bash command in your work directory; returns its output and "
                 "exit code.", {"command": "The command line to run."}),
    "run_python": ("code", "Run Python code in your work directory; returns what it printed "
                   "and its exit code.", {"code": "The Python source to run."}),
    "write_file": ("write_file", "Write a text file in your work directory, replacing any "
                   "file of that name.", {"path": "The file's path, relative to your work "
                   "directory.", "content": "The whole new content of the file."}),
}


def _schema(name: str) -> OpenAIFunctionToolSchema:
    _action, description, params = TOOLS[name]
    return OpenAIFunctionToolSchema.model_validate({"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params), "properties": {
            key: {"type": "string", "description": text} for key, text in params.items()}}}})


class DeepGymTool(BaseTool):
    """One action of an agent episode as a verl tool (``config["action"]``: a name of
    :data:`TOOLS`); each call is a step of the trajectory's session."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        name = config.get("action", "run_bash")
        if name not in TOOLS:
            raise ValueError(f"DeepGymTool action {name!r} is not one of {', '.join(TOOLS)}")
        self.action_type = TOOLS[name][0]
        super().__init__(config, tool_schema or _schema(name))

    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        agent_data = kwargs.get("agent_data")
        session = (getattr(agent_data, "tools_kwargs", None) or {}).get(SESSION_KEY)
        if session is None:
            return ToolResponse(text="error: no episode is open (use the deepgym_agent "
                                     "agent loop)"), 0.0, {}
        if session.done or session.result is not None:
            return ToolResponse(text="error: the episode is over"), 0.0, {}
        try:
            if self.action_type == "write_file":
                action = Action(action_type="write_file", path=str(parameters.get("path", "")),
                                content=str(parameters.get("content", "")))
            else:
                key = "command" if self.action_type == "bash" else "code"
                action = Action(action_type=self.action_type, content=str(parameters.get(key, "")))
        except ValueError as exc:
            return ToolResponse(text=f"error: {exc}"), 0.0, {}
        observation, reward, _done = await asyncio.to_thread(session.step, action)
        return ToolResponse(text=observation.content), reward, {}


@register(AGENT_NAME)
class DeepGymAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` around one agent episode (see the module docstring).
    ``no_verdict_score``, ``mode`` and ``backend`` may be set in the agent loop's config."""

    def __init__(self, *args: Any, no_verdict_score: float = math.nan, mode: str = "local",
                 backend: str = "auto", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.no_verdict_score = float(no_verdict_score)
        self.mode, self.backend = mode, backend

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        env = _environment(kwargs)
        session = _client(self.mode, self.backend).session(env)
        first = await asyncio.to_thread(session.start)
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        messages[-1]["content"] = f"{messages[-1].get('content', '')}\n\n{first.content}"
        tools_kwargs = {**(kwargs.get("tools_kwargs") or {}), SESSION_KEY: session}
        try:
            output = await super().run(sampling_params,
                                       **{**kwargs, "raw_prompt": messages,
                                          "tools_kwargs": tools_kwargs})
        except BaseException:
            await asyncio.to_thread(session.abandon, "the agent loop failed")
            raise
        result = await asyncio.to_thread(session.score)
        self._settle(output, result)
        return output

    def _settle(self, output: AgentLoopOutput, result: RunResult) -> None:
        judged = result.has_verdict
        output.reward_score = result.score if judged else self.no_verdict_score
        if not judged:  # left out of the update: none of its tokens is trained on
            output.response_mask = [0] * len(output.response_mask)
        output.extra_fields["reward_extra_info"] = {
            "score": result.score if judged else self.no_verdict_score,
            "has_verdict": judged, "error_type": result.error_type or "",
            "env_name": result.env_name or ""}


def _environment(kwargs: dict[str, Any]) -> Environment:
    extra = kwargs.get("extra_info") or {}
    name = extra.get("env_name") or kwargs.get("data_source")
    if not name:
        raise ValueError("a deepgym_agent row needs extra_info.env_name (or data_source) "
                         "naming a multi-turn environment")
    from deepgym_ray.suites import load_environment

    env = load_environment(str(name))
    if not isinstance(env, Environment) or env.multi_turn is None:
        raise ValueError(f"environment {name!r} is not multi-turn")
    return env


_CLIENTS: dict[tuple[str, str], Any] = {}


def _client(mode: str, backend: str) -> Any:
    from deepgym_ray.client import DeepGym

    client = _CLIENTS.get((mode, backend))
    if client is None:
        client = _CLIENTS[(mode, backend)] = DeepGym(mode=mode, backend=backend)
    return client


def write_tool_config(path: str | Path, actions: tuple[str, ...] = tuple(TOOLS)) -> Path:
    """Write the tool config verl reads (``multi_turn.tool_config_path``) for ``actions``."""
    import yaml

    path = Path(path)
    tools = [{"class_name": f"{__name__}.DeepGymTool",
              "config": {"type": "native", "action": name}} for name in actions]
    path.write_text(yaml.safe_dump({"tools": tools}, sort_keys=False))
    return path
