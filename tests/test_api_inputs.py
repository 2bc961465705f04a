"""The Python API refuses what it cannot use, up front and in one clear message.

- a sandbox mode that cannot run here: at ``DeepGym(...)``, once, not at every run;
- a wrong type of answer (a string where a list belongs, an int, bytes): TypeError before any
  run, naming the index, from every entry point; None and "" are answers (a judged 0);
- a bad setting: the same message from DeepGym(...), DeepGymConfig(...), a config file and a
  batch call, never pydantic's raw report.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.config import ConfigError, DeepGymConfig
from deepgym_ray.exceptions import ProviderUnavailableError
from deepgym_ray.integrations.trl import make_trl_async_reward_fn, make_trl_reward_fn
from deepgym_ray.reward import RewardFunction
from deepgym_ray.sandboxes import check_mode
from deepgym_ray.sandboxes.base import SandboxProvider
from deepgym_ray.suites import load_environment


@pytest.fixture(scope="module")
def env():
    return load_environment("coin_change")


# --- 1. modes --------------------------------------------------------------------------------


def test_a_mode_that_cannot_run_fails_at_construction(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/deepgym-test/docker.sock")
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    monkeypatch.setenv("DAYTONA_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    for mode in ("docker", "daytona", "e2b", "modal"):
        with pytest.raises(ProviderUnavailableError) as caught:
            DeepGym(mode=mode)
        message = str(caught.value)
        assert f"'{mode}' sandbox provider" in message and "\n" not in message
        with pytest.raises(ProviderUnavailableError):
            check_mode(mode)


def test_the_preflight_hook_is_declared_and_local_stays_cheap():
    assert SandboxProvider.preflight() is None  # the default checks nothing
    code = ("import sys; from deepgym_ray import DeepGym; DeepGym(mode='local'); "
            "print('deepgym_ray.sandboxes.local' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]  # no provider built, no Ray, at construction


@pytest.mark.parametrize("mode", ["local", "docker"])
def test_an_option_the_provider_does_not_take_fails_at_construction(mode):
    with pytest.raises(ValueError) as caught:
        DeepGym(mode=mode, memory_mb=512, memroy_mb=512)
    assert f"the '{mode}' sandbox provider has no option 'memroy_mb'" in str(caught.value)
    assert "memory_mb" in str(caught.value).split("takes", 1)[1]  # what it does take
    with pytest.raises(ValueError, match="DeepGymConfig\\(pool=...\\)"):
        DeepGym(mode=mode, pool={"actors": 2})  # a client setting, not a provider option
    assert DeepGym(mode="local", memory_mb=512).config.provider_options == {"memory_mb": 512}


def test_a_given_provider_skips_the_mode_check(monkeypatch):
    from deepgym_ray.sandboxes.local import LocalProvider

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/deepgym-test/docker.sock")
    client = DeepGym(mode="docker", provider=LocalProvider)  # the mode only labels it
    assert client.config.mode == "docker"


# --- 3. wrong types --------------------------------------------------------------------------

WRONG = [
    ("a whole answer as one string", "must be a list of completions, got one str"),
    (b"bytes", "must be a list of completions, got one bytes"),
    (42, "must be a list of completions, got int"),
    ([123], "[0]: a completion must be a string or a list of messages, got int"),
    (["ok", None, 4.5], "[2]: a completion must be a string or a list of messages, got float"),
    (["ok", b"x"], "[1]: a completion must be a string or a list of messages, got bytes"),
    ([[{"role": "assistant", "content": 7}]], "[0]: message content must be a string"),
]


@pytest.mark.parametrize("outputs, message", WRONG)
def test_wrong_types_raise_one_type_error_up_front_everywhere(local_client, env, outputs,
                                                               message):
    calls = {
        "run_batch": lambda: local_client.run_batch(env, outputs),
        "eval": lambda: local_client.eval([env], outputs),
        "RewardFunction": lambda: RewardFunction(env, local_client)(outputs),
        "TRL": lambda: make_trl_reward_fn(env, local_client)(outputs),
        "TRL async": lambda: asyncio.run(make_trl_async_reward_fn(env, local_client)(outputs)),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError) as caught:
            call()
        assert message in str(caught.value), (name, str(caught.value))


def test_run_refuses_a_non_answer_and_eval_a_single_env(local_client, env):
    with pytest.raises(TypeError, match="model_output: a completion must be .* got int"):
        local_client.run(env, 42)
    with pytest.raises(TypeError, match="envs must be a list of environments"):
        local_client.eval("coin_change", ["x"])


def test_none_and_empty_strings_are_answers_judged_zero(local_client):
    from deepgym_ray.models import Environment

    # A quick verifier with room to spare: the verdict must not depend on the machine's load.
    nonempty = Environment(name="nonempty", timeout=300, verifier_code=(
        "from deepgym_solution import solution_source\n"
        "return 1.0 if solution_source(solution_path).strip() else 0.0\n"))
    batch = local_client.run_batch(nonempty, [None, "", "x = 1"])
    assert batch.rewards == [0.0, 0.0, 1.0] and batch.judged == 3
    assert make_trl_reward_fn(nonempty, local_client)([None, ""]) == [0.0, 0.0]


# --- 4. settings ------------------------------------------------------------------------------

MAX_PARALLEL = "max_parallel must be an int >= 1, got {}"


@pytest.mark.parametrize("value", [0, -5])
def test_max_parallel_gets_one_message_from_every_entry(local_client, env, tmp_path, value):
    message = MAX_PARALLEL.format(value)
    config = tmp_path / "c.yaml"
    config.write_text(f"max_parallel: {value}\n")
    calls = [
        lambda: DeepGym(mode="local", max_parallel=value),  # never silently 32
        lambda: DeepGym(config=DeepGymConfig(mode="local"), max_parallel=value),
        lambda: DeepGymConfig(max_parallel=value),
        lambda: DeepGymConfig.from_yaml(config),
        lambda: local_client.run_batch(env, ["x"], max_parallel=value),
        lambda: RewardFunction(env, local_client, max_parallel=value),
        lambda: make_trl_reward_fn(env, local_client, max_parallel=value),
    ]
    for call in calls:
        with pytest.raises(ValueError) as caught:
            call()
        text = str(caught.value)
        assert message in text and "pydantic" not in text and "\n" not in text, text


def test_other_bad_settings_are_one_clear_line():
    cases = [
        ({"mode": "nonsense"}, "unknown sandbox mode 'nonsense'; choose one of auto, local, "
                               "docker, daytona, e2b, modal"),
        ({"backend": "gpu"}, "backend: Input should be 'auto', 'ray' or 'threads', got 'gpu'"),
        ({"surprise": 1}, "surprise: unknown setting"),
        ({"pool": {"actors": -1}}, "pool.actors: Input should be greater than or equal to 1"),
    ]
    for settings, message in cases:
        with pytest.raises(ConfigError) as caught:
            DeepGymConfig(**settings)
        assert str(caught.value) == f"invalid settings: {message}" or \
            str(caught.value).startswith(f"invalid settings: {message}")
    with pytest.raises(ConfigError, match="unknown sandbox mode 'nonsense'"):
        DeepGym(mode="nonsense")
    assert DeepGym(mode="local", max_parallel=3).config.max_parallel == 3
