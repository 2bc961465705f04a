"""The judge's three built-in environments (one per verifier shape) and the loader."""

from __future__ import annotations

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.envs import list_environments
from deepgym_ray.judge.deepgym_runner import detect_shape
from deepgym_ray.suites import load_environment

SHAPES = {"coin_change": "module", "balanced_brackets": "script", "prime_factors": "body"}
WRONG = {
    "coin_change": "def coin_change(coins, amount):\n    return amount // max(coins)\n",
    "balanced_brackets": "import sys\nfor line in sys.stdin:\n    print('YES')\n",
    "prime_factors": "def factorize(n):\n    return [n]\n",
}


@pytest.fixture(scope="module")
def scored():
    dg = DeepGym("local")
    names = sorted(SHAPES)
    envs = [load_environment(n) for n in names]
    outputs = [e.reference_solution for e in envs] + [WRONG[n] for n in names]
    result = dg.eval(envs + envs, outputs, max_parallel=4)
    return (dict(zip(names, result.results[:3], strict=True)),
            dict(zip(names, result.results[3:], strict=True)))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_reference_scores_one_and_wrong_scores_less(scored, name):
    right, wrong = scored[0][name], scored[1][name]
    assert right.has_verdict and right.score == 1.0 and right.passed, right
    assert wrong.has_verdict and wrong.score < 1.0 and not wrong.passed, wrong
    assert right.env_name == name and right.duration > 0


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_uses_its_shape(name):
    assert detect_shape(load_environment(name).verifier_code) == SHAPES[name]


def test_load_by_path_and_unknown_names(tmp_path):
    folder = tmp_path / "my_env"
    folder.mkdir()
    (folder / "verifier.py").write_text("return 1.0\n")
    (folder / "metadata.json").write_text('{"timeout": 9, "case_timeout": 3, "tags": ["x"]}')
    (folder / "helper.txt").write_text("support")
    env = load_environment(folder)
    assert env.name == "my_env" and env.timeout == 9 and env.support_files == {"helper.txt":
                                                                                "support"}
    with pytest.raises(ValueError, match="coin_change"):
        load_environment("coin_chang")


def test_list_environments_has_the_fields():
    listed = {e["name"]: e for e in list_environments()}
    for name in SHAPES:
        assert set(listed[name]) == {"name", "difficulty", "domain", "tags"}
        assert listed[name]["tags"]
