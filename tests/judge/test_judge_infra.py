"""Failures dated by the runner: before the solution is in play no verdict, after it a judged 0."""

from __future__ import annotations

import pytest

from deepgym_ray.client import DeepGym
from deepgym_ray.exceptions import TimeoutError as DGTimeoutError
from deepgym_ray.exceptions import VerifierError
from deepgym_ray.judge.deepgym_runner import detect_shape, normalise
from deepgym_ray.models import Environment

GOOD = "def f():\n    return 1\n"

RAISING = {
    "syntax_error": ("def verify(:\n    return 1\n", VerifierError),
    "crash_before_loading": ("def verify(p, t=None):\n    raise RuntimeError('boom')\n",
                             VerifierError),
    "prints_no_result": ("print('hello, no json here')\n", VerifierError),
    "returns_none": ("def verify(p, t=None):\n    return None\n", VerifierError),
    "printed_score_then_crash_before_play": (
        "import json\nprint(json.dumps({'score': 1.0, 'passed': True}))\nraise SystemExit(3)\n",
        None),
    "hangs_before_loading": ("import time\ndef verify(p, t=None):\n    time.sleep(60)\n",
                             DGTimeoutError),
}


def env_for(code: str, **kw) -> Environment:
    return Environment(name="infra", verifier_code=code, timeout=kw.pop("timeout", 3),
                       case_timeout=kw.pop("case_timeout", 2), **kw)


@pytest.fixture(scope="module")
def dg():
    return DeepGym("local")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(k for k, v in RAISING.items() if v[1] is not None))
def test_run_raises_and_batch_has_no_verdict(dg, name):
    code, exc_type = RAISING[name]
    env = env_for(code)
    with pytest.raises(exc_type):
        dg.run(env, GOOD)
    batch = dg.run_batch(env, [GOOD, GOOD], max_parallel=2)
    assert [r.has_verdict for r in batch.results] == [False, False]
    assert batch.no_verdict == 2 and batch.passed == 0
    assert all(r.env_name == "infra" and r.details for r in batch.results)


def test_script_exit_code_other_than_0_1_is_reported_error(dg):
    result = dg.run(env_for(RAISING["printed_score_then_crash_before_play"][0]), GOOD)
    assert not result.has_verdict and result.exit_code == 2 and result.score == 0.0


@pytest.mark.parametrize("value", ["float('nan')", "1.5", "-0.5", "float('inf')"])
def test_invalid_scores_never_become_reward(dg, value):
    result = dg.run(env_for(f"def verify(p, t=None):\n    return {value}\n"), GOOD)
    assert not result.has_verdict and result.reward is None
    assert result.error_type == "invalid_score"


def test_score_printed_before_a_crash_after_play_is_not_kept(dg):
    code = ("import json, sys\nfrom deepgym_solution import load_solution\n"
            "sol = load_solution(sys.argv[1])\n"
            "print(json.dumps({'score': 1.0, 'passed': True}))\n"
            "sol.f() + None\n")
    result = dg.run(env_for(code), GOOD)
    assert result.has_verdict and result.score == 0.0
    assert result.error_type == "solution_error"


def test_uncaught_solution_timeout_is_solution_timeout(dg):
    code = ("from deepgym_solution import load_solution\n"
            "def verify(p, t=None):\n    return 1.0 if load_solution(p).f() else 0.0\n")
    result = dg.run(env_for(code, case_timeout=1), "def f():\n    while True:\n        pass\n")
    assert result.has_verdict and result.score == 0.0
    assert result.error_type == "solution_timeout"


@pytest.mark.slow
def test_verifier_hanging_after_play_is_solution_timeout(dg):
    code = ("import time\nfrom deepgym_solution import solution_source\n"
            "def verify(p, t=None):\n    solution_source(p)\n    time.sleep(60)\n")
    result = dg.run(env_for(code, timeout=2, case_timeout=1), GOOD)
    assert result.has_verdict and result.error_type == "solution_timeout" and result.score == 0


def test_opening_the_solution_file_counts_as_in_play(dg):
    code = "def verify(p, t=None):\n    open(p).read()\n    raise ValueError('x')\n"
    result = dg.run(env_for(code), GOOD)
    assert result.has_verdict and result.error_type == "solution_error"


@pytest.mark.parametrize("how", ["relative", "through_a_link", "through_a_linked_folder"])
def test_opening_the_solution_file_by_another_path_counts_as_in_play(dg, how):
    # The runner resolves only paths that end in the file's name or in a link (a stat per
    # component on every open costs): each other way to reach the file must still count.
    reach = {
        "relative": "os.chdir(os.path.dirname(p)); open(os.path.basename(p)).read()",
        "through_a_link": "os.symlink(p, 'answer.txt'); open('answer.txt').read()",
        "through_a_linked_folder": "os.symlink(os.path.dirname(p), 'there'); "
                                   "open(os.path.join('there', os.path.basename(p))).read()",
    }[how]
    code = f"import os\ndef verify(p, t=None):\n    {reach}\n    raise ValueError('x')\n"
    result = dg.run(env_for(code), GOOD)
    assert result.has_verdict and result.error_type == "solution_error"


def test_opening_another_file_is_not_in_play(dg):
    code = ("import os\ndef verify(p, t=None):\n    open(os.devnull).read()\n"
            "    raise ValueError('x')\n")
    with pytest.raises(VerifierError):
        dg.run(env_for(code), GOOD)


def test_exceptions_keep_builtin_types_and_values_are_plain(dg):
    code = '''
from deepgym_solution import load_solution, OpaqueValue, SolutionError
def verify(p, t=None):
    s = load_solution(p)
    checks = []
    try:
        s.boom()
    except KeyError as e:
        checks.append("KeyError" in repr(e))
    try:
        s.custom()
    except SolutionError as e:
        checks.append("Weird" in str(e))
    checks.append(s.data() == {"a": [1, 2.5, None, True], "b": (b"x", {3}, frozenset([4]))})
    checks.append(isinstance(s.obj(), OpaqueValue) and s.obj() != s.obj())
    checks.append(s.get("CONST") == 7)
    checks.append(s.echo([1, "two"], k={"x": 1}) == ([1, "two"], {"k": {"x": 1}}))
    return sum(checks) / 6
'''
    solution = '''
CONST = 7
class Weird(Exception):
    pass
def boom():
    raise KeyError("k")
def custom():
    raise Weird("w")
def data():
    return {"a": [1, 2.5, None, True], "b": (b"x", {3}, frozenset([4]))}
def obj():
    return object()
def echo(*args, **kwargs):
    return args[0], kwargs
'''
    result = dg.run(env_for(code, timeout=10), solution)
    assert result.score == 1.0, result.details


def test_old_style_verifier_importing_the_solution_gets_a_proxy(dg):
    code = '''
import importlib.util, os
def verify(solution_path, test_cases_path=None):
    spec = importlib.util.spec_from_file_location("solution", solution_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return 1.0 if mod.pid() != os.getpid() and mod.f() == 1 else 0.0
'''
    solution = "import os\ndef pid():\n    return os.getpid()\ndef f():\n    return 1\n"
    assert dg.run(env_for(code), solution).score == 1.0
    plain_import = ("import os, sys\ndef verify(solution_path, test_cases_path=None):\n"
                    "    sys.path.insert(0, os.path.dirname(solution_path))\n"
                    "    import solution\n"
                    "    ok = solution.pid() != os.getpid() and solution.f() == 1\n"
                    "    return 1.0 if ok else 0.0\n")
    assert dg.run(env_for(plain_import), solution).score == 1.0


def test_shapes_and_normalise():
    assert detect_shape("def verify(p, t=None):\n    return 1\n") == "module"
    assert detect_shape("print(1)\n") == "script"
    assert detect_shape("x = 1\nif x:\n    return 0.5\n") == "body"
    with pytest.raises(SyntaxError):
        detect_shape("def (\n")
    assert normalise(True) == {"score": 1.0, "passed": True}
    assert normalise(0.25) == {"score": 0.25, "passed": False}
    out = normalise({"score": 1, "cases": [{"passed": True}, {"id": "b", "passed": False}],
                     "reward_components": {"c": 1}, "details": {"k": 1}})
    assert out["cases"][0]["id"] == "test_0" and out["cases"][1]["score"] == 0.0
    assert out["passed"] is True and out["details"] == '{"k": 1}'
