"""The verifier runtime, function by function, written the DeepGym way (verifiers that import
from ``deepgym_solution``) against hostile answers: a symlink race and planted links on
``read_output``, a file over the limit, a module that lies in ``__dir__`` (and ``__all__``,
``__getattr__``, its class's ``__dict__``), a multi-file answer whose modules import each other
in a cycle, patches git can write that a tree of texts cannot hold.

Every case runs in one batch on the real local sandbox (module fixture ``judged``); a verifier
reports what it saw as JSON in ``details`` and the tests read it.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from deepgym_ray.models import Environment

HEAD = "import json, os\nfrom deepgym_solution import *  # noqa\n"


def _env(name, body, **fields):
    """A module-shape verifier whose ``verify`` runs ``body`` (which sets ``seen``)."""
    code = (HEAD + "\n\ndef verify(solution_path, test_cases_path=None):\n"
            + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
            + "\n    return {'score': 1.0, 'passed': True, 'details': json.dumps(seen)}\n")
    return Environment(name=f"rt-{name}", verifier_code=code, timeout=60, case_timeout=5,
                       **fields)


# -- solution_source ------------------------------------------------------------------------------

SOURCE = _env("source", """
    names = ["two_sum", "Solver", "square", "alias", "conditional", "twice", "missing"]
    whole = solution_source(solution_path)
    seen = {n: "<whole>" if solution_source(solution_path, n) == whole
            else solution_source(solution_path, n) for n in names}
""")
SOURCE_ANSWER = '''import functools

LIMIT = 3


@functools.lru_cache
def two_sum(nums, target):
    return [0, 1]


class Solver:
    def run(self):
        return 1


square = lambda x: x * x  # noqa: E731
alias = two_sum
if LIMIT:
    def conditional():
        return 2


def twice():
    return 1


def twice():
    return 2
'''
UNPARSEABLE = "def two_sum(:\n    return 1\n"

# -- run_solution -------------------------------------------------------------------------------

RUN = _env("run", """
    r = run_solution(solution_path, args=["a", 1], stdin="hi")
    loop = run_solution(solution_path, args=["loop"], timeout=1)
    seen = [r.exit_code, r.stdout, r.stderr, r.timed_out, loop.exit_code, loop.timed_out]
""")
RUN_ANSWER = '''import sys
if sys.argv[1:] == ["loop"]:
    while True:
        pass
print("out", sys.argv[1:], sys.stdin.read().upper())
print("err", file=sys.stderr)
sys.exit(3)
'''

# -- load_files: a package whose modules import each other in a cycle ----------------------------

FILES = _env("files", """
    with open(solution_path, encoding="utf-8") as f:
        answer = json.load(f)
    seen = {}
    pkg = load_files(answer["package"], "pkg")
    seen["calls"] = [pkg.shortest(3), pkg.util.other(), pkg.pid != os.getpid(), pkg.__name__]
    seen["side by side"] = load_files(answer["modules"], "main.py").run()
    try:
        load_files(answer["broken cycle"], "a")
        seen["broken cycle"] = "imported"
    except ImportError as exc:
        seen["broken cycle"] = str(exc)
""")
FILES_ANSWER = json.dumps({
    "package": {
        "pkg/__init__.py": "import os\nfrom pkg.graph import shortest\npid = os.getpid()\n",
        "pkg/graph.py": "from pkg import util\nNAME = 'graph'\n\n\ndef shortest(x):\n"
                        "    return util.double(x) + 1\n",
        "pkg/util.py": "import pkg.graph\n\n\ndef double(x):\n    return 2 * x\n\n\n"
                       "def other():\n    return pkg.graph.NAME\n",
    },
    "modules": {"main.py": "import helper\n\n\ndef run():\n    return helper.VALUE\n",
                "helper.py": "import main\nVALUE = 'helper'\n"},
    "broken cycle": {"a.py": "from b import B\nA = 1\n", "b.py": "from a import A\nB = 2\n"},
})

# -- apply_patch ----------------------------------------------------------------------------------

PATCH = _env("patch", """
    files = {"calc.py": "def add(a, b):\\n    return a - b\\n", "notes/read me.txt": "old\\n"}
    with open(solution_path, encoding="utf-8") as f:
        new = apply_patch(f.read(), files)
    calc = load_files(new, "calc")
    seen = [calc.add(2, 3), new["notes/read me.txt"], files["calc.py"].count("a - b")]
""")
RIGHT_PATCH = '''diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
diff --git "a/notes/read me.txt" "b/notes/read me.txt"
--- "a/notes/read me.txt"
+++ "b/notes/read me.txt"
@@ -1 +1 @@
-old
+new
'''
RENAME_PATCH = ("diff --git a/calc.py b/calc2.py\nsimilarity index 100%\n"
                "rename from calc.py\nrename to calc2.py\n")
NEW_FILE_PATCH = ("diff --git a/x.py b/x.py\nnew file mode 100755\n--- /dev/null\n"
                  "+++ b/x.py\n@@ -0,0 +1 @@\n+x = 1\n")
STALE_PATCH = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
               "-    return 0\n+    return 1\n")

# -- solution_namespace: a module that lies about its names ---------------------------------------

NAMESPACE = _env("namespace", """
    sol = load_solution(solution_path)
    names = solution_namespace(sol)
    seen = [sorted(names), names["PUBLIC"], names["f"](), names["K"]().kind]
""")
LIAR = '''import math
import sys
import types

PUBLIC = 1
_private = 2
__all__ = ["PUBLIC", "ghost"]


def f():
    return math.floor(2.5)


class K:
    kind = "k"


def __dir__():
    return ["ghost", 42, "PUBLIC"]


def __getattr__(name):
    return "fabricated"


class Liar(types.ModuleType):
    @property
    def __dict__(self):
        return {"fake": 1}

    def __dir__(self):
        raise RuntimeError("no names for you")


sys.modules[__name__].__class__ = Liar
'''

# -- read_output: links, a FIFO, a file over the limit, and a symlink race ------------------------

OUTPUT = _env("output", """
    here = os.path.dirname(solution_path)
    secret = os.path.abspath("f.txt")
    with open(secret, "w") as f:
        f.write("SECRET")
    sol = load_solution(solution_path)
    sol.plant(secret)

    def attempt(read, *args):
        try:
            return read(*args)
        except OutputRefused as exc:
            return "refused: " + type(exc).__name__
        except OSError as exc:
            return type(exc).__name__

    seen = {p: attempt(read_output, p, here) for p in (
        "out/ok.txt", "link.txt", "dirlink/f.txt", "fifo", "hard.txt", "../f.txt", secret,
        "missing.txt")}
    seen["root None"] = attempt(read_output, "out/ok.txt", None)
    seen["big, 4096"] = attempt(read_output_bytes, "big.bin", here, 4096)
    seen["big, 5000"] = len(attempt(read_output_bytes, "big.bin", here, 5000))
    sol.race(secret)
    race = set()
    for _ in range(400):
        race.add(attempt(read_output, "race.txt", here))
        race.add(attempt(read_output, "racedir/f.txt", here))
    seen["race"] = sorted(race)
    seen["flips"] = sol.stop() > 0
""")
PLANTER = '''import os
import threading

_RUN = {"on": False, "flips": 0}


def plant(secret):
    os.makedirs("out", exist_ok=True)
    with open("out/ok.txt", "w") as f:
        f.write("fine")
    os.symlink(secret, "link.txt")
    os.symlink(os.path.dirname(secret), "dirlink")
    os.mkfifo("fifo")
    with open("big.bin", "wb") as f:
        f.write(b"x" * 5000)
    with open("orig.txt", "w") as f:
        f.write("o")
    os.link("orig.txt", "hard.txt")


def _regular(path):
    with open(path, "w") as f:
        f.write("safe")


def _flip(secret):
    """Swap race.txt between a file and a link to the secret (atomically), and racedir between
    a folder and a link to the secret's folder, until stopped."""
    while _RUN["on"]:
        os.symlink(secret, "race.txt.new")
        os.replace("race.txt.new", "race.txt")
        _regular("race.txt.new")
        os.replace("race.txt.new", "race.txt")
        os.rename("racedir", "racedir.old")
        os.symlink(os.path.dirname(secret), "racedir")
        os.unlink("racedir")
        os.rename("racedir.old", "racedir")
        _RUN["flips"] += 1


def race(secret):
    # Written before the verifier reads: a file caught between its creation and its write
    # reads as "", which is the planter's race, not the reader's.
    os.makedirs("racedir", exist_ok=True)
    _regular("racedir/f.txt")
    _RUN["on"] = True
    threading.Thread(target=_flip, args=(secret,), daemon=True).start()


def stop():
    _RUN["on"] = False
    return _RUN["flips"]
'''

# -- consulted(): the point that dates a failure --------------------------------------------------

BEFORE = _env("before", """
    seen = consulted()
    raise RuntimeError(f"the verifier broke, consulted={seen}")
""")
AFTER = _env("after", """
    solution_source(solution_path)
    seen = consulted()
    raise RuntimeError(f"the verifier broke, consulted={seen}")
""")

# -- a name the runtime does not have: no verdict, naming it --------------------------------------

MISSING_TOP = Environment(name="rt-missing-top", timeout=30, verifier_code=(
    "from deepgym_solution import load_solution, nope_top\n\n\n"
    "def verify(solution_path, test_cases_path=None):\n    return 1.0\n"))
MISSING_LATE = _env("missing-late", """
    sol = load_solution(solution_path)
    from deepgym_solution import nope_late
    seen = nope_late(sol)
""")
MISSING_ATTR = Environment(name="rt-missing-attr", timeout=30, verifier_code=(
    "import deepgym_solution as ds\n\n\ndef verify(solution_path, test_cases_path=None):\n"
    "    ds.load_solution(solution_path)\n    return ds.nope_attr(solution_path)\n"))
GUARDED = _env("guarded", """
    try:
        from deepgym_solution import maybe_later
    except ImportError:
        maybe_later = None
    seen = [maybe_later, load_solution(solution_path).f()]
""")
PLAIN = "def f():\n    return 1\n"

CASES = {
    "source": (SOURCE, SOURCE_ANSWER), "source unparseable": (SOURCE, UNPARSEABLE),
    "run": (RUN, RUN_ANSWER), "files": (FILES, FILES_ANSWER),
    "patch": (PATCH, RIGHT_PATCH), "rename": (PATCH, RENAME_PATCH),
    "new file mode": (PATCH, NEW_FILE_PATCH), "stale": (PATCH, STALE_PATCH),
    "namespace": (NAMESPACE, LIAR), "output": (OUTPUT, PLANTER),
    "before": (BEFORE, PLAIN), "after": (AFTER, PLAIN),
    "missing top": (MISSING_TOP, PLAIN), "missing late": (MISSING_LATE, PLAIN),
    "missing attr": (MISSING_ATTR, PLAIN), "guarded": (GUARDED, PLAIN),
}


@pytest.fixture(scope="module")
def judged(local_client):
    """Every case's RunResult, from one batch."""
    envs, answers = zip(*CASES.values(), strict=True)
    results = local_client.eval(list(envs), list(answers)).results
    return dict(zip(CASES, results, strict=True))


def _seen(result):
    assert (result.score, result.has_verdict, result.error_type) == (1.0, True, None), \
        result.details
    return json.loads(result.details)


def test_solution_source_by_name(judged):
    seen = _seen(judged["source"])
    assert seen["two_sum"] == ("@functools.lru_cache\ndef two_sum(nums, target):\n"
                               "    return [0, 1]\n")
    assert seen["Solver"] == "class Solver:\n    def run(self):\n        return 1\n"
    assert seen["twice"] == "def twice():\n    return 2\n"  # the definition that stands
    for name in ("square", "alias", "conditional", "missing"):
        assert seen[name] == "<whole>", name
    assert set(_seen(judged["source unparseable"]).values()) == {"<whole>"}


def test_run_solution_result(judged):
    assert _seen(judged["run"]) == [3, "out ['a', '1'] HI\n", "err\n", False, None, True]


def test_load_files_with_import_cycles(judged):
    seen = _seen(judged["files"])
    assert seen["calls"] == [7, "graph", True, "pkg"]  # in a process of its own
    assert seen["side by side"] == "helper"
    assert "partially initialized module" in seen["broken cycle"]  # as Python says it


def test_apply_patch(judged):
    assert _seen(judged["patch"]) == [5, "new\n", 1]  # the verifier's own tree unchanged
    for name, error_type in (("rename", "invalid_patch"), ("new file mode", "invalid_patch"),
                             ("stale", "patch_apply_failed")):
        result = judged[name]
        assert (result.score, result.has_verdict, result.error_type) == (
            0.0, True, error_type), result.details
    assert "rename" in judged["rename"].details
    assert "new file with a git file mode" in judged["new file mode"].details
    assert "hunk 1 of calc.py does not apply" in judged["stale"].details


def test_solution_namespace_of_a_lying_module(judged):
    assert _seen(judged["namespace"]) == [["K", "Liar", "PUBLIC", "f"], 1, 2, "k"]


def test_read_output_refuses_links_fifos_and_oversize(judged):
    seen = _seen(judged["output"])
    assert seen["out/ok.txt"] == seen["root None"] == "fine"
    for path in ("link.txt", "dirlink/f.txt", "fifo", "hard.txt", "../f.txt"):
        assert seen[path] == "refused: OutputRefused", path
    assert seen[[k for k in seen if k.startswith("/")][0]] == "refused: OutputRefused"
    assert seen["missing.txt"] == "FileNotFoundError"
    assert seen["big, 4096"] == "refused: OutputRefused"  # never a prefix
    assert seen["big, 5000"] == 5000


def test_read_output_through_a_symlink_race(judged):
    seen = _seen(judged["output"])
    assert seen["flips"] is True
    assert "SECRET" not in seen["race"]
    assert set(seen["race"]) <= {"safe", "refused: OutputRefused", "FileNotFoundError"}


def test_consulted_dates_a_failure(judged):
    before, after = judged["before"], judged["after"]
    assert (before.has_verdict, before.error_type) == (False, "verifier_error")
    assert "consulted=False" in before.details
    assert (after.has_verdict, after.error_type, after.score) == (True, "solution_error", 0.0)
    assert "consulted=True" in after.details


@pytest.mark.parametrize("case, name", [("missing top", "nope_top"),
                                        ("missing late", "nope_late"),
                                        ("missing attr", "nope_attr")])
def test_a_missing_runtime_name_is_the_verifiers_error(judged, case, name):
    result = judged[case]
    assert (result.has_verdict, result.error_type) == (False, "verifier_error"), result.details
    assert f"uses {name} from deepgym_solution" in result.details


def test_a_guarded_import_of_a_missing_name_runs(judged):
    assert _seen(judged["guarded"]) == [None, 1]
