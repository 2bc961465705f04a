"""Hostile answers aimed at the solution module's new surface (handles, generators, classes),
control-flow exceptions, and call timeouts under a neighbour's load.

Each attack is written as "cheat if it works": the verifier passes an answer only when the
attack got past the boundary, so a judged 0 shows it failed; the verifier itself always gets to
return its own result (a crash of the verifier would be no verdict, not a 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from helpers.judge_probe import processes_with, write_back_forger

from deepgym_ray.models import Environment

MARK = "DGPROXY" + uuid.uuid4().hex[:12]

# PROBE is an expression on ``sol``; EXPECTED what only a working attack would produce.
PROBE_VERIFIER = '''
from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        got = PROBE
    except Exception as exc:
        return {"score": 0.0, "passed": False,
                "details": "caught " + type(exc).__name__ + ": " + str(exc)[:300]}
    return {"score": 1.0 if got == EXPECTED else 0.0, "details": "got " + repr(got)[:300]}
'''

LIAR = '''
class Liar:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __bool__(self):
        return True
    def __len__(self):
        return 3
'''

# name -> (probe expression, expected, solution, what the verifier must have caught); the
# attacks that make the solution process work hard before it refuses get more CPU time.
GENEROUS = {"huge_object_behind_a_handle", "too_many_handles"}
ATTACKS = {
    "huge_object_behind_a_handle": (
        "sol.Solution().make().data", "[1]",
        "class Holder:\n    def __init__(self):\n        self.data = ['x' * 1000] * 100000\n"
        "class Solution:\n    def make(self):\n        return Holder()\n",
        "caught SolutionError: the value is too large"),
    "recursive_object_behind_a_handle": (
        "sol.Solution().make().items", "[1, [1]]",
        "class Holder:\n    def __init__(self):\n        self.items = [1]\n"
        "        self.items.append(self.items)\n"
        "class Solution:\n    def make(self):\n        return Holder()\n",
        "got <opaque solution value <a self-referencing value>>"),
    "self_referencing_instance": (
        "(lambda h: h.me is h and h.me.me.value)(sol.make())", "'secret'",
        "class Node:\n    value = 'public'\n    def __init__(self):\n        self.me = self\n"
        "def make():\n    return Node()\n",
        "got 'public'"),
    "getattr_that_hangs": (
        "sol.Weird().answer", "42",
        "class Weird:\n    def __getattr__(self, name):\n        while True:\n            pass\n",
        "caught TimeoutError"),
    "hasattr_that_hangs": (
        "hasattr(sol.Weird(), 'answer') and 42", "42",
        "class Weird:\n    def __getattr__(self, name):\n        while True:\n            pass\n",
        "caught TimeoutError"),
    "generator_step_that_hangs": (
        "list(sol.steps())", "[1, 2]",
        "def steps():\n    yield 1\n    while True:\n        pass\n",
        "caught TimeoutError"),
    "init_that_sleeps": (
        "sol.Slow().answer()", "42",
        "import time\nclass Slow:\n    def __init__(self):\n        time.sleep(3600)\n"
        "    def answer(self):\n        return 42\n",
        "caught TimeoutError"),
    "init_that_forks": (
        "sol.Forker().answer()", "42",
        "import os, sys\nclass Forker:\n    def __init__(self):\n        if os.fork() == 0:\n"
        f"            os.execv(sys.executable, [sys.executable, '-c', "
        f"'import time; time.sleep(120)', '{MARK}'])\n"
        "    def answer(self):\n        return 41\n",
        "got 41"),
    "object_that_claims_equality": (
        "sol.Solution().answer()", "[3, 1, 2]",
        LIAR + "class Solution:\n    def answer(self):\n        return Liar()\n",
        "got <solution Liar object>"),
    "claims_equality_inside_a_list": (
        "sol.answer()", "[3, 1, 2]",
        LIAR + "def answer():\n    return [Liar(), Liar(), Liar()]\n",
        "got [<solution Liar object>"),
    "too_many_handles": (
        "len(sol.many())", "200000",
        "def many():\n    return [object() for _ in range(200000)]\n",
        "caught SolutionError: the verifier holds more than"),
    "replaces_its_argument_with_a_liar": (
        "(lambda xs: (sol.sort(xs), xs)[1])([3, 1, 2])", "[1, 2, 3]",
        LIAR + "def sort(xs):\n    xs[:] = [Liar(), Liar(), Liar()]\n",
        "got [<solution Liar object>"),
    # A copied call (``function_caller``, which ``score_cases`` uses) never writes back: an
    # answer that empties the verifier's list would pass ``got == sorted(xs)`` with [].
    "forged_write_back_on_a_copied_call": (
        "(lambda xs: [__import__('deepgym_proxy').function_caller(sol, 'sorted_copy')(xs), "
        "xs])([3, 1, 2])", "[[], []]",
        write_back_forger([[0, ["l", []]]]) + "def sorted_copy(xs):\n    return []\n",
        "caught SolutionError: the solution sent an unreadable value: changes to arguments it "
        "was not asked for"),
    # A write-back names each container it sent once: a second change to the same one is
    # forged, and nothing of the reply is applied.
    "write_back_twice_to_one_argument": (
        "(lambda xs: (sol.sort(xs), xs)[1])([3, 1, 2])", "[9, 9, 9]",
        write_back_forger([[0, ["l", [["i", "1"], ["i", "2"], ["i", "3"]]]],
                 [0, ["l", [["i", "9"], ["i", "9"], ["i", "9"]]]]])
        + "def sort(xs):\n    xs.sort()\n",
        "caught SolutionError: the solution sent an unreadable value: malformed change"),
    "handle_as_a_callable_in_the_verifier": (
        "sol.get_hook()()", "'pwned'",
        "import os\ndef get_hook():\n    def hook():\n        return os.getcwd()\n"
        "    return hook\n",
        "got '/"),
}


@pytest.fixture(scope="module")
def outcomes(local_client):
    names = sorted(ATTACKS)
    envs, answers = [], []
    for name in names:
        probe, expected, solution, _ = ATTACKS[name]
        code = PROBE_VERIFIER.replace("PROBE", probe).replace("EXPECTED", expected)
        envs.append(Environment(name=f"hostile_{name}", verifier_code=code, timeout=60,
                                case_timeout=10 if name in GENEROUS else 0.5))
        answers.append(solution)
    batch = local_client.eval(envs, answers, max_parallel=4)
    return dict(zip(names, batch.results, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_on_the_module_surface_is_a_judged_zero(outcomes, name):
    result = outcomes[name]
    assert result.has_verdict and result.score == 0.0 and not result.passed, result
    assert (result.details or "").startswith(ATTACKS[name][3]), result.details


def test_nothing_forked_by_a_constructor_survives(outcomes):
    assert processes_with(MARK) == []


@pytest.mark.slow
def test_a_generator_that_never_ends_is_the_answers_timeout(local_client):
    verifier = PROBE_VERIFIER.replace("PROBE", "list(sol.naturals())").replace("EXPECTED", "[]")
    env = Environment(name="endless_generator", verifier_code=verifier, timeout=4,
                      case_timeout=1)
    result = local_client.run_safe(env, "def naturals():\n    n = 0\n    while True:\n"
                                        "        yield n\n        n += 1\n")
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "solution_timeout", result


# --- control flow never crosses as itself (issue 10) ---------------------------------------------

ZIP_VERIFIER = '''
from deepgym_solution import load_solution

INPUTS, EXPECTED = [1, 2, 3], [2, 4, 6]


def verify(solution_path, test_cases_path=None):
    sol = load_solution(solution_path)
    try:
        ok = all(a == b for a, b in zip(map(sol.double, INPUTS), EXPECTED))
    except Exception as exc:
        return {"score": 0.0, "passed": False, "details": type(exc).__name__ + ": " + str(exc)}
    return {"score": 1.0 if ok else 0.0, "passed": ok}
'''


@pytest.mark.parametrize("raised", ["StopIteration", "StopAsyncIteration", "GeneratorExit",
                                    "KeyboardInterrupt", "SystemExit", "MyStop"])
def test_control_flow_raised_by_the_solution_is_an_ordinary_error(local_client, raised):
    env = Environment(name="zip_compare", verifier_code=ZIP_VERIFIER, timeout=20,
                      case_timeout=2)
    answer = f"class MyStop(StopIteration):\n    pass\ndef double(x):\n    raise {raised}\n"
    result = local_client.run_safe(env, answer)
    assert result.has_verdict and result.score == 0.0, result
    assert result.details.startswith("SolutionError: "), result.details
    assert raised in result.details
    right = local_client.run_safe(env, "def double(x):\n    return 2 * x\n")
    assert right.score == 1.0, right


# --- per-call timeouts count the solution's own CPU time (issue 10) ------------------------------

CPU_VERIFIER = '''
from deepgym_cases import score_cases


def verify(solution_path, test_cases_path=None):
    return score_cases(solution_path, "work", [("half_a_second", (0.5,), 0.5)])
'''

# Burns ``seconds`` of its own CPU time, however busy the machine is.
CPU_ANSWER = '''
import time


def work(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds
'''


@pytest.fixture()
def busy_neighbours():
    """A busy process per core for as long as the test runs (more would only take the
    CPU from the rest of the test run too)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
             for _ in range(os.cpu_count() or 2)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_right_answer_is_not_timed_out_by_a_neighbours_load(local_client, busy_neighbours):
    env = Environment(name="cpu_bound", verifier_code=CPU_VERIFIER, timeout=120, case_timeout=1)
    result = local_client.run_safe(env, CPU_ANSWER)
    assert all(proc.poll() is None for proc in busy_neighbours)  # they were busy throughout
    assert result.has_verdict and result.score == 1.0, result
    hangs = local_client.run_safe(env, "def work(seconds):\n    while True:\n        pass\n")
    assert hangs.has_verdict and hangs.score == 0.0, hangs
    assert hangs.cases[0].model_dump()["error"].startswith("timed out"), hangs.cases
