"""``deepgym-ray qa``: the probes it makes, what it reports for verifiers that can be gamed or
are flaky, and every built-in environment passing it (one map, the local sandbox)."""

from __future__ import annotations

import ast
import json

import pytest

from deepgym_ray.cli import main
from deepgym_ray.cli.qa_probes import examples, hardcoded, mutants, stubs

REFERENCE = '''def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return high
    return x
'''
TASK = "Write `clamp(x, low, high)`: `clamp(5, 0, 3)` is `3`, and `clamp(-1, 0, 3)` returns `0`."


def test_stubs_keep_the_signatures_and_do_nothing():
    made = stubs(REFERENCE)
    assert [p.label for p in made] == ["empty answer", "clamp: pass",
                                       "clamp: raise NotImplementedError", "clamp: return None"]
    namespace: dict = {}
    exec(made[3].code, namespace)
    assert namespace["clamp"](1, 2, 3) is None
    assert [p.label for p in stubs("print(input())\n")][1:] == [
        "program: pass", "program: raise NotImplementedError", "program: return None"]


def test_the_visible_examples_by_heart():
    assert examples(TASK, {"clamp"}) == [("clamp", (5, 0, 3), 3), ("clamp", (-1, 0, 3), 0)]
    assert examples(TASK, {"other"}) == []
    probe = hardcoded(REFERENCE, TASK)
    namespace: dict = {}
    exec(probe.code, namespace)
    assert (namespace["clamp"](5, 0, 3), namespace["clamp"](-1, 0, 3)) == (3, 0)
    assert namespace["clamp"](2, 0, 3) == 3  # anything else: the first example's value
    assert hardcoded(REFERENCE, "no examples here") is None


def test_mutants_are_distinct_one_change_programs_in_a_seeded_sample():
    made = mutants(REFERENCE, limit=50)
    codes = [p.code for p in made]
    assert len(set(codes)) == len(codes) and ast.unparse(ast.parse(REFERENCE)) + "\n" not in codes
    labels = {p.label for p in made}
    assert {"line 2: < -> <=", "line 4: > -> >=", "line 2: if-branch dropped"} <= labels
    for probe in made:
        compile(probe.code, probe.label, "exec")
    few = mutants(REFERENCE, limit=3, seed=1)
    assert len(few) == 3 and few == mutants(REFERENCE, limit=3, seed=1)
    assert {p.code for p in few} <= set(codes)


# The environments qa is tried on: span(xs), whose every mutant a good verifier can catch.
SPAN = "def span(xs):\n    return max(xs) - min(xs)\n"
SPAN_TASK = "Write `span(xs)`: `span([3, 1, 2])` is `2` and `span([5])` is `0`."


def _env(root, name, verifier):
    folder = root / name
    folder.mkdir()
    (folder / "task.md").write_text(SPAN_TASK)
    (folder / "reference_solution.py").write_text(SPAN)
    (folder / "verifier.py").write_text(verifier)
    (folder / "metadata.json").write_text(json.dumps({"name": name, "timeout": 20}))
    return folder


GOOD = '''from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    span = load_solution(solution_path).span
    cases = [([3, 1, 2], 2), ([5], 0), ([1, 10], 9), ([-4, 4], 8), ([7, 7, 7], 0),
             ([0, 100, 50], 100)]
    good = sum(span(xs) == want for xs, want in cases)
    return {"score": good / len(cases), "passed": good == len(cases)}
'''
# Only checks that span exists: every stub passes.
LAX = '''from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    return {"score": 1.0 if callable(load_solution(solution_path).span) else 0.0}
'''
# Checks the two visible examples only: the answer that knows them by heart passes.
EXAMPLES_ONLY = '''from deepgym_solution import load_solution


def verify(solution_path, test_cases_path=None):
    span = load_solution(solution_path).span
    ok = span([3, 1, 2]) == 2 and span([5]) == 0
    return {"score": 1.0 if ok else 0.0, "passed": ok}
'''
# Only lists whose items are all equal: max and min swapped give 0 as well.
WEAK = GOOD.replace("[([3, 1, 2], 2), ([5], 0), ([1, 10], 9), ([-4, 4], 8), ([7, 7, 7], 0),\n"
                    "             ([0, 100, 50], 100)]", "[([5], 0), ([2, 2], 0)]")


def test_the_report_names_what_each_verifier_lets_through(capsys, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, verifier in (("good", GOOD), ("lax", LAX), ("examples_only", EXAMPLES_ONLY),
                           ("weak", WEAK)):
        _env(suite, name, verifier)
    out = tmp_path / "report.json"
    code = main(["qa", str(suite), "--backend", "threads", "--mode", "local", "--repeats", "2",
                 "--out", str(out), "--no-progress"])
    text, err = capsys.readouterr()
    assert code == 1, text + err
    report = {e["name"]: e for e in json.loads(out.read_text())["environments"]}
    good = report["good"]
    assert good["ok"] and good["problems"] == [] and good["reference_scores"] == [1.0, 1.0]
    assert good["mutants"] == {"judged": 3, "caught": 3, "share": 1.0, "survivors": []}
    assert good["hardcoded_score"] < 0.5 and good["gamed_by"] == []
    lax = report["lax"]
    assert not lax["ok"] and {g["answer"] for g in lax["gamed_by"]} >= {
        "span: pass", "span: return None"}
    assert any(p.startswith("gameable: span: pass") for p in lax["problems"])
    memorised = report["examples_only"]
    assert memorised["hardcoded_score"] == 1.0 and not memorised["ok"]
    assert any("visible example" in p for p in memorised["problems"])
    weak = report["weak"]
    assert sorted(c["change"] for c in weak["mutants"]["survivors"]) == [
        "line 2: max -> min", "line 2: min -> max"]
    assert "mutants survive: 1/3 caught (under 80%)" in weak["problems"], weak
    assert "good" in text and "FAIL" in text and "1 of 4 environments passed" in err


def test_flaky_and_failing_references_and_what_is_skipped(capsys, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    coin = GOOD.replace("    return {", "    import random\n    if random.random() < 0.5:\n"
                                       "        good -= 1\n    return {")
    _env(suite, "flaky", coin)
    _env(suite, "broken", GOOD.replace("([1, 10], 9)", "([1, 10], 8)"))
    code = main(["qa", str(suite), "--backend", "threads", "--mode", "local", "--repeats", "16",
                 "--mutants", "0", "--json", "--no-progress"])
    report = {e["name"]: e for e in json.loads(capsys.readouterr().out)["environments"]}
    assert code == 1
    assert report["broken"]["problems"][0].startswith("the reference fails")
    # 16 runs at even odds: all 16 pass once in 65,536 runs of this test.
    assert report["flaky"]["problems"][0].startswith(("flaky", "the reference fails")), report
    code = main(["qa", "fix_the_calculator", "--backend", "threads", "--mode", "local",
                 "--json", "--no-progress"])
    [skipped] = json.loads(capsys.readouterr().out)["environments"]
    assert skipped["skipped"].startswith("not a single-program environment")
    assert code == 3  # nothing judged


@pytest.mark.slow
def test_every_built_in_environment_passes(capsys, tmp_path):
    out = tmp_path / "builtin.json"
    # Few mutants, and a mutant that loops stops at 3 s: the whole of it is one map of about
    # 180 runs. (With the defaults, and 12 mutants each, every environment passed too.)
    code = main(["qa", "builtin", "--backend", "threads", "--mode", "local", "--repeats", "1",
                 "--mutants", "3", "--time-limit", "3", "--threshold", "0.6", "--out", str(out),
                 "--no-progress"])
    text, err = capsys.readouterr()
    report = json.loads(out.read_text())
    failing = {e["name"]: e["problems"] for e in report["environments"] if not e["ok"]}
    assert code == 0 and not failing, text
    assert all(e["hardcoded_score"] in (None, 0.0) or e["hardcoded_score"] < 0.5
               for e in report["environments"])


def test_the_time_limit_caps_mutants_and_leaves_the_reference_its_own_limits():
    from deepgym_ray.cli.qa_command import check_environments, plan_probes
    from deepgym_ray.models import RunResult
    from deepgym_ray.suites import load_environment

    class Recorder:  # the limits each probe would run with; every run scores 0
        def score_code(self, envs, codes, on_result=None):
            self.runs = list(envs)
            return [RunResult(score=0.0) for _ in envs]

    env = load_environment("coin_change")
    plan = plan_probes([env], repeats=2, count=3, seed=0)
    client = Recorder()
    check_environments(client, [env], plan, time_limit=0.5)
    limits = {(probe.kind, run.timeout, run.case_timeout)
              for probe, run in zip(plan[0], client.runs, strict=True)}
    assert ("mutant", 0.5, 0.5) in limits and ("reference", env.timeout, env.case_timeout) \
        in limits
    assert all(kind == "mutant" for kind, timeout, _ in limits if timeout == 0.5), limits
