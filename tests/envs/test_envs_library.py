"""The built-in environment library, scored for real through the local sandbox.

Every built-in environment is scored with its reference solution, with a subtly wrong answer
(twice, to show the verifier is deterministic) and with an empty answer, in one parallel batch.
The subtly wrong answers live in ``tests/helpers/wrong_solutions.py``: any extra file in an
environment folder would be shipped into the sandbox as a support file.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers.wrong_solutions import SUBTLY_WRONG

from deepgym_ray.envs import builtin_names, list_environments
from deepgym_ray.envs.registry import BUILTIN_DIR
from deepgym_ray.reward import RewardFunction
from deepgym_ray.suites import load_environment

NAMES = builtin_names()
KINDS = ("reference", "subtle", "subtle_again", "empty")


@pytest.fixture(scope="module")
def client(local_client):
    return local_client


@pytest.fixture(scope="module")
def scored(client):
    """{(env name, kind): RunResult} for every built-in environment and answer kind."""
    envs, outputs, keys = [], [], []
    for name in NAMES:
        env = load_environment(name)
        answers = {"reference": env.reference_solution, "subtle": SUBTLY_WRONG.get(name, ""),
                   "subtle_again": SUBTLY_WRONG.get(name, ""), "empty": ""}
        for kind in KINDS:
            envs.append(env)
            outputs.append(f"Here is my answer:\n```python\n{answers[kind]}```\n")
            keys.append((name, kind))
    batch = client.eval(envs, outputs, max_parallel=4)
    assert batch.env_names == [name for name, _ in keys]
    return dict(zip(keys, batch.results, strict=True))


def _case_view(result):
    return [(case.id, case.passed, case.score) for case in result.cases or ()]


def test_library_is_large_and_varied():
    assert len(NAMES) >= 16, NAMES
    domains = {load_environment(name).domain for name in NAMES}
    assert {"dynamic_programming", "strings", "arrays", "graphs", "trees", "parsing",
            "math"} <= domains


def test_every_environment_has_a_subtly_wrong_answer():
    assert sorted(SUBTLY_WRONG) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_folder_and_metadata(name):
    folder = BUILTIN_DIR / name
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["name"] == name
    assert {"difficulty", "domain", "tags", "timeout", "case_timeout"} <= set(meta)
    env = load_environment(name)
    assert env.name == name and env.task.strip() and env.reference_solution
    assert env.timeout == meta["timeout"] and env.case_timeout == meta["case_timeout"]
    # The verifier reaches the solution only through deepgym_solution (directly or through
    # deepgym_cases, which uses it), never by itself.
    source = env.verifier_code
    assert re.search(r"^from deepgym_(solution|cases) import ", source, re.MULTILINE), name
    assert not re.search(r"\bexec\(|\beval\(|importlib|__import__|runpy", source), name


def test_list_environments_shows_every_builtin():
    listed = {entry["name"]: entry for entry in list_environments()}
    assert sorted(listed) == NAMES
    for name, entry in listed.items():
        assert entry["difficulty"] in {"easy", "medium", "hard"}, name
        assert isinstance(entry["domain"], str) and entry["domain"], name
        assert entry["tags"] and all(isinstance(tag, str) for tag in entry["tags"]), name


@pytest.mark.parametrize("name", NAMES)
def test_reference_scores_one(scored, name):
    result = scored[name, "reference"]
    assert result.has_verdict and result.error_type is None, result
    assert result.score == 1.0 and result.passed, result
    assert all(case.passed for case in result.cases or ()), result


@pytest.mark.parametrize("name", NAMES)
def test_subtly_wrong_answer_is_partly_right(scored, name):
    result = scored[name, "subtle"]
    assert result.has_verdict, result
    assert 0.0 < result.score < 1.0 and not result.passed, result


@pytest.mark.parametrize("name", NAMES)
def test_empty_answer_scores_below_one(scored, name):
    result = scored[name, "empty"]
    assert result.has_verdict, result
    assert result.score < 1.0 and not result.passed, result


@pytest.mark.parametrize("name", NAMES)
def test_verifier_is_deterministic(scored, name):
    first, second = scored[name, "subtle"], scored[name, "subtle_again"]
    assert first.score == second.score
    assert _case_view(first) == _case_view(second)
    reference_cases = [case.id for case in scored[name, "reference"].cases or ()]
    assert [case_id for case_id, _, _ in _case_view(first)] == reference_cases


def test_script_environment_runs_the_solution_on_stdin(scored):
    env = load_environment("word_frequency_cli")
    assert "run_solution" in env.verifier_code
    wrong = scored["word_frequency_cli", "subtle"]  # only the tie order is wrong
    failed = {case.id for case in wrong.cases if not case.passed}
    assert "ties_alphabetical" in failed and "k_zero" not in failed


def test_reward_components_are_reported(scored):
    assert scored["roman_numerals", "reference"].reward_components == {
        "to_roman": 1.0, "from_roman": 1.0}
    components = scored["roman_numerals", "subtle"].reward_components
    assert components["to_roman"] == 1.0 and 0.0 < components["from_roman"] < 1.0


def test_cases_have_their_own_timeouts(scored):
    # The subtly wrong answer is right but linear in n: only the cases with the short limit
    # (huge n) fail, each by running out of its own time.
    cases = [case.model_dump() for case in scored["fibonacci_mod", "subtle"].cases]
    limits = {case["timeout"] for case in cases}
    assert len(limits) == 2
    short = min(limits)
    for case in cases:
        assert case["passed"] == (case["timeout"] != short), case
        if not case["passed"]:
            assert "timed out" in case["error"], case


def test_support_file_sits_next_to_the_verifier(scored):
    env = load_environment("spelling_suggestions")
    assert set(env.support_files) == {"words.txt"}
    assert "beautiful" in env.support_files["words.txt"]
    assert "beautiful" not in env.verifier_code
    assert scored["spelling_suggestions", "reference"].score == 1.0


def test_test_cases_json_is_loaded_and_used(scored):
    env = load_environment("expression_evaluator")
    ids = [case["id"] for case in env.test_cases]
    assert "precedence" in ids
    reference_ids = [case.id for case in scored["expression_evaluator", "reference"].cases]
    assert reference_ids[: len(ids)] == ids
    wrong = {case.id: case.passed for case in scored["expression_evaluator", "subtle"].cases}
    assert wrong["precedence"] is False and wrong["parentheses"] is True


# --- a folder in the DeepGym product's format, made here --------------------------------------

_VERIFIER = '''
import json
import os

from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    with open(test_cases_path) as f:
        cases = json.load(f)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "data", "bonus.txt")) as f:
        bonus = int(f.read())
    solution = load_solution(solution_path)
    results = []
    for i, case in enumerate(cases):
        try:
            got = solution.add(*case["input"])
            ok = type(got) is int and got == sum(case["input"]) + bonus
        except Exception:
            ok = False
        results.append({"id": f"test_{i}", "passed": ok, "score": 1.0 if ok else 0.0})
    n = sum(r["passed"] for r in results)
    return {"score": n / len(results), "passed": n == len(results),
            "details": f"{n}/{len(results)} passed", "cases": results}
'''


@pytest.fixture()
def product_folder(tmp_path):
    folder = tmp_path / "add_with_bonus"
    (folder / "data").mkdir(parents=True)
    (folder / "task.md").write_text("Write add(a, b) returning a + b + 1.\n")
    (folder / "verifier.py").write_text(_VERIFIER)
    (folder / "reference_solution.py").write_text("def add(a, b):\n    return a + b + 1\n")
    (folder / "metadata.json").write_text(json.dumps({
        "name": "add_with_bonus", "difficulty": "easy", "domain": "math", "tags": ["demo"],
        "timeout": 20, "case_timeout": 5}))
    (folder / "test_cases.json").write_text(json.dumps(
        [{"input": [1, 2]}, {"input": [-3, 1]}, {"input": [0, 0]}, {"input": [-5, -5]}]))
    (folder / "data" / "bonus.txt").write_text("1\n")
    return folder


def test_product_format_folder_loads_and_scores(client, product_folder):
    env = load_environment(str(product_folder))
    assert env.name == "add_with_bonus" and env.support_files == {"data/bonus.txt": "1\n"}
    assert len(env.test_cases) == 4
    answers = [
        env.reference_solution,
        "def add(a, b):\n    return abs(a) + abs(b) + 1\n",  # wrong where an input is negative
        "",
    ]
    batch = client.run_batch(env, answers, max_parallel=3)
    right, wrong, empty = batch.results
    assert right.has_verdict and right.score == 1.0 and right.passed
    assert _case_view(right) == [(f"test_{i}", True, 1.0) for i in range(4)]
    assert wrong.has_verdict and wrong.score == 0.5 and not wrong.passed
    assert [case.passed for case in wrong.cases] == [True, False, True, False]
    # An answer that defines nothing fails at its first call: a judged 0, not an outage.
    assert empty.has_verdict and empty.score == 0.0 and not empty.passed

    per_test = RewardFunction(env, client=client).per_test_rewards(answers[:2])
    assert per_test[0] == {"test_0": 1.0, "test_1": 1.0, "test_2": 1.0, "test_3": 1.0,
                           "overall": 1.0}
    assert per_test[1] == {"test_0": 1.0, "test_1": 0.0, "test_2": 1.0, "test_3": 0.0,
                           "overall": 0.5}


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match="knapsack_01"):
        load_environment("knapsack")
