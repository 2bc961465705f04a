"""The solution's code never runs in the runner's process (deepgym_guard), and the verifier's
ways out of that process are exits the runner reports (deepgym_exits).

A verifier that runs the solution's text itself gets either a correct judgement (the runner's
import guard turns ``spec_from_file_location`` and ``import solution`` of the solution file into
``load_solution``) or the verifier's error without a verdict, naming ``load_solution`` as the
fix: for a hostile solution that forges the runner's final line through ``gc`` and leaves with
``posix._exit(0)``, and for a right answer alike. Each verifier gives 1.0 to the right answer
and to a forged result, so a verdict of 1.0 would show the attack worked.
"""

from __future__ import annotations

import pytest

from deepgym_ray.models import Environment

# Finds the runner's result channel and token through gc, writes a passing final line on it
# and leaves (what an attacker did); its own answer is wrong.
HOSTILE = r'''
import gc, json, posix

def _forge():
    for obj in gc.get_objects():
        if type(obj).__name__ == "_Channel" and hasattr(obj, "token"):
            line = {"kind": "verdict", "score": 1.0, "passed": True, "exit_code": 0,
                    "final": True, "in_play": True, "details": "forged"}
            posix.write(obj.fd, (obj.token + " " + json.dumps(line) + "\n").encode())
            posix._exit(0)

_forge()

def answer():
    _forge()
    return "wrong"
'''
RIGHT = 'def answer():\n    return "right"\n'

# verify() bodies that run the solution in the verifier's own process; each leaves the
# solution's module (or namespace) in ``sol``.
IN_PROCESS = {
    "exec_text": "ns = {}\nexec(open(solution_path).read(), ns)\nanswer = ns['answer']\n",
    "exec_bytes": "ns = {}\nexec(open(solution_path, 'rb').read(), ns)\nanswer = ns['answer']\n",
    "runpy": "import runpy\nanswer = runpy.run_path(solution_path)['answer']\n",
    "compile_exec": ("ns = {}\nsrc = open(solution_path).read()\n"
                     "exec(compile(src, '<solution>', 'exec'), ns)\nanswer = ns['answer']\n"),
    "compile_by_path": ("ns = {}\nsrc = open(solution_path).read()\n"
                        "exec(compile(src, solution_path, 'exec'), ns)\nanswer = ns['answer']\n"),
    "compile_as_verifier": ("ns = {}\nsrc = open(solution_path).read()\n"
                            "exec(compile(src, __file__, 'exec'), ns)\nanswer = ns['answer']\n"),
    "ast_tree": ("import ast\nns = {}\ntree = ast.parse(open(solution_path).read())\n"
                 "exec(compile(tree, '<solution>', 'exec'), ns)\nanswer = ns['answer']\n"),
    "ast_part": ("import ast\nns = {}\nsrc = open(solution_path).read()\n"
                 "parts = [n for n in ast.parse(src).body if not isinstance(n, ast.Expr)]\n"
                 "exec('\\n'.join(ast.get_source_segment(src, n) for n in parts), ns)\n"
                 "answer = ns['answer']\n"),
    "indented": ("import textwrap\nns = {}\nsrc = open(solution_path).read()\n"
                 "exec('if True:\\n' + textwrap.indent(src, '    '), ns)\n"
                 "answer = ns['answer']\n"),
    "source_loader": ("import importlib.machinery\n"
                      "mod = importlib.machinery.SourceFileLoader('sol', solution_path)"
                      ".load_module()\nanswer = mod.answer\n"),
    "copy_and_import": ("import shutil, sys, os\nshutil.copy(solution_path, 'sol_copy.py')\n"
                        "sys.path.insert(0, os.getcwd())\nimport sol_copy\n"
                        "answer = sol_copy.answer\n"),
    "subprocess_python": ("import subprocess, sys\n"
                          "subprocess.run([sys.executable, solution_path], capture_output=True)\n"
                          "answer = lambda: 'right'\n"),
    "os_system_python": ("import os\nos.system('cd / && python3 ' + solution_path)\n"
                         "answer = lambda: 'right'\n"),
}
# The same, through the runner's import guard: the module is load_solution's.
PROXIED = {
    "spec_from_file_location": (
        "import importlib.util\nspec = importlib.util.spec_from_file_location('sol', "
        "solution_path)\nmod = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\nanswer = mod.answer\n"),
    "import_solution": ("import os, sys\nsys.path.insert(0, os.path.dirname(solution_path))\n"
                        "import solution\nanswer = solution.answer\n"),
}


def verifier(body: str, *, catch: bool = False) -> str:
    """A module verifier running ``body``; 1.0 for the right answer. With ``catch`` it also
    gives 1.0 when running the body raised anything at all (a refusal must still win)."""
    lines = ["def verify(solution_path, test_cases_path=None):"]
    if catch:
        lines.append("    try:")
        lines += ["        " + line for line in body.splitlines()]
        lines += ["    except BaseException:", "        return 1.0"]
    else:
        lines += ["    " + line for line in body.splitlines()]
    lines.append("    return 1.0 if answer() == 'right' else 0.0")
    return "\n".join(lines) + "\n"


def env(code: str) -> Environment:
    return Environment(name="guard", verifier_code=code, timeout=20, case_timeout=5)


def assert_refused(result) -> None:
    assert not result.has_verdict and result.error_type == "verifier_error", result
    assert result.score == 0.0 and not result.passed
    assert "load_solution(solution_path)" in str(result.details), result.details


@pytest.mark.parametrize("solution", ["hostile", "right"])
@pytest.mark.parametrize("way", sorted(IN_PROCESS))
def test_running_the_solution_in_the_verifier_is_its_error(local_client, way, solution):
    code = HOSTILE if solution == "hostile" else RIGHT
    assert_refused(local_client.run_safe(env(verifier(IN_PROCESS[way])), code))


@pytest.mark.parametrize("way", ["exec_text", "runpy", "ast_tree"])
def test_a_refusal_the_verifier_catches_is_still_its_error(local_client, way):
    result = local_client.run_safe(env(verifier(IN_PROCESS[way], catch=True)), HOSTILE)
    assert_refused(result)


@pytest.mark.parametrize("way", sorted(PROXIED))
def test_loading_the_solution_file_by_path_is_judged_in_a_solution_process(local_client, way):
    hostile = local_client.run(env(verifier(PROXIED[way])), HOSTILE)
    assert hostile.has_verdict and hostile.score == 0.0, hostile
    right = local_client.run(env(verifier(PROXIED[way])), RIGHT)
    assert right.has_verdict and right.score == 1.0, right


# A solution that, run as a script, leaves a compiled module next to its file in its own
# directory; a verifier that then loads that file the usual way would read the .pyc.
PYC_LEFT = r'''
import importlib.util, marshal, os, sys
here = os.path.abspath(sys.argv[0])
code = compile("def answer():\n    return 'right'\n", here, "exec")
cache = importlib.util.cache_from_source(here)
os.makedirs(os.path.dirname(cache), exist_ok=True)
st = os.stat(here)
header = (int(st.st_mtime).to_bytes(4, "little")
          + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
with open(cache, "wb") as f:
    f.write(importlib.util.MAGIC_NUMBER + bytes(4) + header + marshal.dumps(code))
def answer():
    return "wrong"
'''
PYC_VERIFIER = '''
import importlib.util, os
from deepgym_solution import run_solution
from deepgym_spawn import solution_dir

def verify(solution_path, test_cases_path=None):
    run_solution(solution_path)
    copy = os.path.join(solution_dir(), os.path.basename(solution_path))
    spec = importlib.util.spec_from_file_location("sol", copy)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return 1.0 if mod.answer() == "right" else 0.0
'''


def test_compiled_code_the_solution_left_is_refused(local_client):
    assert_refused(local_client.run_safe(env(PYC_VERIFIER), PYC_LEFT))


STATIC_AND_LOADED = '''
import ast, collections, dataclasses, subprocess, sys
from deepgym_solution import load_solution

Case = collections.namedtuple("Case", "given want")


@dataclasses.dataclass
class Check:
    name: str
    ok: bool = False


def verify(solution_path, test_cases_path=None):
    source = open(solution_path).read()
    tree = ast.parse(source, filename=solution_path)
    if any(isinstance(node, ast.Import) and node.names[0].name == "gc" for node in ast.walk(tree)):
        return {"score": 0.0, "details": "imports gc"}
    checks = [Check("defines answer", any(isinstance(n, ast.FunctionDef) for n in tree.body))]
    shown = subprocess.run(["cat", solution_path], capture_output=True, text=True).stdout
    ran = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    checks.append(Check("tools", shown == source and ran.stdout.strip() == "42"))
    exec("checks.append(Check('evaluated', ast.literal_eval('[1, 2]') == [1, 2]))")
    checks.append(Check("answer", load_solution(solution_path).answer() == "right"))
    ok = all(check.ok for check in checks)
    return 1.0 if ok and load_solution(solution_path).answer() == "right" else 0.0
'''
# A right answer that shares lines with what the verifier compiles of its own (dataclasses,
# namedtuple, its own exec) and holds the lines of common code.
RIGHT_SHARING = '''import os
import sys


class Check:
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return True
        return NotImplemented


def answer():
    return "right"
'''


@pytest.mark.parametrize("code", [RIGHT, RIGHT_SHARING], ids=["right", "right_sharing"])
def test_static_checks_and_load_solution_still_judge(local_client, code):
    result = local_client.run(env(STATIC_AND_LOADED), code)
    assert result.has_verdict and result.score == 1.0 and result.error_type is None, result


# A support file the host puts next to the verifier, which a right answer may equal line for
# line: the verifier imports it (compiled in its process) and still judges.
REFERENCE = """def answer():
    # the reference answer, as the task's author wrote it
    return "right"
"""
WITH_REFERENCE = """
import os, sys
from deepgym_solution import load_solution

def verify(solution_path, test_cases_path=None):
    sys.path.insert(0, os.getcwd())
    import reference
    return 1.0 if load_solution(solution_path).answer() == reference.answer() else 0.0
"""


def test_a_support_module_equal_to_the_answer_is_still_imported(local_client):
    environment = Environment(name="guard", verifier_code=WITH_REFERENCE, timeout=20,
                              case_timeout=5, support_files={"reference.py": REFERENCE})
    result = local_client.run(environment, REFERENCE)
    assert result.has_verdict and result.score == 1.0, result


EXITS = {
    "posix._exit(0)": "import posix\nposix._exit(0)\n",
    "os.kill SIGKILL": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "os.kill(0, SIGTERM)": "import os, signal\nos.kill(0, signal.SIGTERM)\n",
    "os.killpg": "import os, signal\nos.killpg(os.getpgrp(), signal.SIGKILL)\n",
    "raise_signal": "import signal\nsignal.raise_signal(signal.SIGTERM)\n",
    "abort": "import os\nos.abort()\n",
    "kill from a thread": ("import os, signal, threading, time\nthreading.Thread(target=os.kill,"
                           " args=(os.getpid(), signal.SIGKILL)).start()\ntime.sleep(30)\n"),
    "ctypes _exit": "import ctypes\nctypes.CDLL(None)._exit(0)\n",
    "os.execv": "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'pass'])\n",
}


@pytest.mark.parametrize("way", sorted(EXITS))
def test_the_verifiers_ways_out_give_no_verdict(local_client, way):
    body = ("from deepgym_solution import load_solution\n"
            "ok = load_solution(solution_path).answer() == 'right'\n" + EXITS[way]
            + "answer = lambda: 'right'\n")
    result = local_client.run_safe(env(verifier(body)), RIGHT)
    assert not result.has_verdict and result.error_type == "verifier_error", result
    assert result.score == 0.0 and not result.passed


def test_a_signal_the_verifier_handles_is_its_own_business(local_client):
    body = ("import os, signal\nseen = []\n"
            "signal.signal(signal.SIGUSR1, lambda *a: seen.append(1))\n"
            "os.kill(os.getpid(), signal.SIGUSR1)\n"
            "answer = lambda: 'right' if seen else 'not delivered'\n")
    result = local_client.run(env(verifier(body)), RIGHT)
    assert result.has_verdict and result.score == 1.0, result


# A solution whose output is code that forges the runner's final line, printed and returned.
FORGE_EXPRESSION = (
    "[(__import__('posix').write(o.fd, (o.token + ' ' + __import__('json').dumps("
    "{'kind': 'verdict', 'score': 1.0, 'passed': True, 'exit_code': 0, 'final': True, "
    "'in_play': True, 'details': 'forged'}) + chr(10)).encode()), __import__('posix')._exit(0))"
    " for o in __import__('gc').get_objects() if type(o).__name__ == '_Channel']")
OUTPUT_HOSTILE = f"FORGE = {FORGE_EXPRESSION!r}\nprint(FORGE)\n\ndef answer():\n    return FORGE\n"
EVALUATES = {
    "printed": ("from deepgym_solution import run_solution\n"
                "eval(run_solution(solution_path).stdout)\nanswer = lambda: 'right'\n"),
    "returned": ("from deepgym_solution import load_solution\n"
                 "eval(load_solution(solution_path).answer())\nanswer = lambda: 'right'\n"),
    "returned_line": ("from deepgym_solution import load_solution\n"
                      "text = 'result = ' + load_solution(solution_path).answer().strip()\n"
                      "exec(text, {})\nanswer = lambda: 'right'\n"),
}


@pytest.mark.parametrize("way", sorted(EVALUATES))
def test_evaluating_what_the_solution_sent_is_the_verifiers_error(local_client, way):
    result = local_client.run_safe(env(verifier(EVALUATES[way])), OUTPUT_HOSTILE)
    assert_refused(result)
    assert "literal_eval" in str(result.details)


READS_VALUES = '''
import ast, json
from deepgym_solution import load_solution, run_solution

EXPECTED = "the right answer"


def verify(solution_path, test_cases_path=None):
    printed = ast.literal_eval(run_solution(solution_path).stdout)
    got = load_solution(solution_path).answer()
    namespace = {}
    exec(f"same = {got!r} == {EXPECTED!r}", namespace)
    ok = printed == [1, 2, 3, 4] and json.loads(json.dumps(got)) == EXPECTED and namespace["same"]
    return 1.0 if ok else 0.0
'''
PRINTS_VALUES = ('print([1, 2, 3, 4])\n\ndef answer():\n    return "the right answer"\n')


def test_reading_what_the_solution_sent_as_values_still_judges(local_client):
    result = local_client.run(env(READS_VALUES), PRINTS_VALUES)
    assert result.has_verdict and result.score == 1.0, result


# A verifier that embeds its task's prompt as a string and runs it (HumanEval's do), against
# an answer that repeats the prompt line for line (a chat model's whole program).
PROMPT = ('def greet(name):\n    """Say hello: greet(\'Ann\') gives \'hello, Ann\'."""\n'
          '    pass\n')
EMBEDS_PROMPT = f'''
from deepgym_solution import load_solution

PROMPT = {PROMPT!r}


def verify(solution_path, test_cases_path=None):
    namespace = {{}}
    exec(compile(PROMPT, "<prompt>", "exec"), namespace)
    return 1.0 if load_solution(solution_path).greet("Ann") == "hello, Ann" else 0.0
'''
REPEATS_PROMPT = ('def greet(name):\n    """Say hello: greet(\'Ann\') gives \'hello, Ann\'."""\n'
                  '    return "hello, " + name\n')


def test_a_prompt_the_verifier_embeds_and_runs_is_its_own(local_client):
    result = local_client.run(env(EMBEDS_PROMPT), REPEATS_PROMPT)
    assert result.has_verdict and result.score == 1.0, result


@pytest.mark.parametrize("case", ["exec_text", "pyc_left", "eval_printed", "static", "exit"])
def test_in_docker_too(docker_client, case):
    """The guard and the exits live in the judge's files: the same in a container."""
    if case == "exec_text":
        assert_refused(docker_client.run_safe(env(verifier(IN_PROCESS["exec_text"])), HOSTILE))
    elif case == "pyc_left":
        assert_refused(docker_client.run_safe(env(PYC_VERIFIER), PYC_LEFT))
    elif case == "eval_printed":
        assert_refused(docker_client.run_safe(env(verifier(EVALUATES["printed"])),
                                              OUTPUT_HOSTILE))
    elif case == "static":
        result = docker_client.run(env(STATIC_AND_LOADED), RIGHT_SHARING)
        assert result.has_verdict and result.score == 1.0, result
    else:
        body = "import posix\nposix._exit(0)\nanswer = lambda: 'right'\n"
        result = docker_client.run_safe(env(verifier(body)), RIGHT)
        assert not result.has_verdict and result.error_type == "verifier_error", result
