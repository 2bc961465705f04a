"""The eval's files and text: solutions JSONL, the resumable results file, the summary."""

from __future__ import annotations

import json

import pytest

from deepgym_ray.cli.eval_runner import solution_jobs
from deepgym_ray.cli.results_file import ResultsFile, ResultsFileError, record_for
from deepgym_ray.cli.solutions_file import SolutionsFileError, read_solutions
from deepgym_ray.cli.summary import format_summary, pass_rate_line, run_line
from deepgym_ray.completions import completion_to_code
from deepgym_ray.models import EvalResult, RunResult
from deepgym_ray.suites import load_environment

# --- solutions file -----------------------------------------------------------------------


def write(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_solutions_file_reads_every_shape(tmp_path):
    path = write(
        tmp_path / "s.jsonl",
        json.dumps({"task_id": "coin_change", "completion": "print(1)"}),
        "",
        json.dumps({"env": "humaneval/0", "code": "x = 1"}),
        json.dumps({"completion": [{"role": "assistant", "content": "hi"}]}),
    )
    lines = list(read_solutions(path))
    assert [(s.line, s.task_id, s.is_code) for s in lines] == [
        (1, "coin_change", False), (3, "humaneval/0", True), (4, None, False)]


@pytest.mark.parametrize("line, message", [
    ("{not json", "line 2: not valid JSON"),
    ("[1, 2]", "line 2: expected a JSON object, got list"),
    ('{"task_id": "a"}', "line 2: no 'completion' (or 'code') key"),
    ('{"task_id": "a", "completion": 5}', "line 2: 'completion' must be a string"),
    ('{"task_id": "a", "code": ["x"]}', "line 2: 'code' must be a string"),
    ('{"task_id": "", "completion": "x"}', "line 2: task_id must be a non-empty string"),
    ('{"task_id": "a", "env": "b", "completion": "x"}', "line 2: give one of"),
    ('{"completion": "x", "code": "y"}', "line 2: give 'completion' or 'code', not both"),
])
def test_solutions_file_names_the_bad_line(tmp_path, line, message):
    path = write(tmp_path / "s.jsonl", '{"completion": "fine"}', line)
    with pytest.raises(SolutionsFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        list(read_solutions(path))


def test_missing_solutions_file(tmp_path):
    with pytest.raises(SolutionsFileError, match="does not exist"):
        list(read_solutions(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize("code", [
    "def f():\n    return 1\n",
    'S = """\n```python\nx\n```\n"""\n',
    'S = """\n  ~~~~\n`````\n"""\nprint(S)\n',
])
def test_code_is_sent_as_given_and_completions_once_extracted(tmp_path, code):
    env = load_environment("coin_change")
    fenced = f"Here:\n````python\n{code}````\n"
    path = write(tmp_path / "s.jsonl", json.dumps({"env": "coin_change", "code": code}),
                 json.dumps({"env": "coin_change", "completion": fenced}),
                 json.dumps({"env": "coin_change", "completion": [{"role": "user",
                                                                    "content": "no answer"}]}))
    as_code, completed, unanswered = solution_jobs([env], path)
    assert as_code.code == code and as_code.completion == code
    assert completed.code == completion_to_code(fenced) and completed.completion == fenced
    assert unanswered.code is None and "no assistant turn" in unanswered.problem
    assert len({as_code.answer_sha, unanswered.answer_sha}) == 2


# --- results file -------------------------------------------------------------------------


def _record(task_id, sample=0, score=1.0):
    return record_for(task_id, sample, "sha", RunResult(score=score, passed=score == 1.0))


def test_results_file_round_trip_and_truncated_last_line(tmp_path):
    path = tmp_path / "out.jsonl"
    with ResultsFile(path) as out:
        out.append(_record("a"))
        out.append(_record("b", 1, 0.0))
    cut = json.dumps(_record("c"))[:25]  # a kill in the middle of a write
    with path.open("a") as handle:
        handle.write(cut)
    records = ResultsFile(path).read()
    assert sorted(records) == [("a", 0), ("b", 1)]
    assert records[("b", 1)]["passed"] is False
    # The cut line is gone from the file, so appending yields clean lines again.
    assert path.read_text().endswith("}\n")
    with ResultsFile(path) as out:
        out.append(_record("c"))
    assert sorted(ResultsFile(path).read()) == [("a", 0), ("b", 1), ("c", 0)]


def test_results_file_keeps_a_complete_last_line_without_newline(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_record("a")) + "\n" + json.dumps(_record("b")))
    assert sorted(ResultsFile(path).read()) == [("a", 0), ("b", 0)]
    assert path.read_text().endswith("\n")


def test_results_file_rejects_a_corrupt_middle_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_record("a")) + "\nnot json\n" + json.dumps(_record("b")) + "\n")
    with pytest.raises(ResultsFileError, match="line 2 is not a deepgym-ray result"):
        ResultsFile(path).read()


def test_results_file_is_locked_while_written(tmp_path):
    path = tmp_path / "out.jsonl"
    with ResultsFile(path):
        with pytest.raises(ResultsFileError, match="being written by another eval"):
            ResultsFile(path).__enter__()


# --- summary ------------------------------------------------------------------------------


def _eval(results):
    return EvalResult(results=results, env_names=[f"e{i}" for i in range(len(results))])


def test_summary_with_no_verdict_runs():
    results = (
        [RunResult(score=1.0, passed=True)] * 7
        + [RunResult(score=0.0, passed=False)] * 2
        + [RunResult(error_type="sandbox_error", details="provider\nunreachable")]
    )
    text = format_summary(_eval(results), [f"t{i}" for i in range(10)])
    lines = text.splitlines()
    assert lines[0] == "Runs: 10 (judged 9, no verdict 1)"
    assert lines[1] == "Pass Rate: 70.00% (judged 77.78%, 10.00% no verdict)"
    assert lines[2] == "Average Score: 0.7000 (judged 0.7778, 10.00% no verdict)"
    assert lines[3:] == ["No verdict:", "  t9: ERROR (sandbox_error) provider unreachable"]


def test_summary_spec_example_numbers():
    results = ([RunResult(score=1.0, passed=True)] * 63 + [RunResult(score=0.0)] * 27
               + [RunResult(error_type="timeout", details="slow")] * 10)
    assert pass_rate_line(_eval(results)) == \
        "Pass Rate: 63.00% (judged 70.00%, 10.00% no verdict)"


def test_summary_without_no_verdict_runs_lists_nothing_extra():
    results = [RunResult(score=1.0, passed=True), RunResult(score=0.5, passed=False)]
    text = format_summary(_eval(results), ["a", "b"])
    assert text.splitlines() == [
        "Runs: 2 (judged 2, no verdict 0)",
        "Pass Rate: 50.00% (judged 50.00%, 0.00% no verdict)",
        "Average Score: 0.7500 (judged 0.7500, 0.00% no verdict)",
    ]
    assert "Failed:\n  b: FAIL score=0.5000" in format_summary(_eval(results), ["a", "b"],
                                                               show_failures=True)


def test_a_no_verdict_run_that_reported_a_pass_is_shown_as_an_error():
    result = RunResult(score=1.0, passed=True, exit_code=2, details="verifier broke")
    assert run_line(result) == "ERROR (verifier_error) verifier broke"
    assert format_summary(_eval([result]), ["x"]).splitlines()[1] == \
        "Pass Rate: 0.00% (judged 0.00%, 100.00% no verdict)"


def test_the_progress_bars_last_state_is_printed_once_off_a_terminal(monkeypatch):
    import io
    import sys

    from deepgym_ray.cli.eval_command import progress_bar

    log = io.StringIO()  # not a terminal, as a log file or a Ray job's logs
    monkeypatch.setattr(sys, "stderr", log)
    bar = progress_bar(3, 0, "coin_change", True)
    bar.mininterval = 0  # the last update comes after the print interval: it is shown
    bar.update(3)
    assert log.getvalue().count("3/3") == 1
    bar.close()
    assert log.getvalue().count("3/3") == 1, log.getvalue()
    assert log.getvalue().endswith("\n")


def _parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    return path


def test_a_parquet_file_reads_as_its_json_lines_would(tmp_path):
    rows = [{"task_id": "coin_change", "completion": "print(1)", "code": None},
            {"task_id": "humaneval/0", "completion": None, "code": "x = 1"},
            {"task_id": None, "completion": [{"role": "assistant", "content": "hi"}],
             "code": None}]
    # Parquet needs one type per column: the conversation row goes in a file of its own.
    flat = _parquet(tmp_path / "s.parquet", rows[:2])
    chat = _parquet(tmp_path / "chat.data", rows[2:])  # known by its magic bytes, not its name
    got = [(s.line, s.unit, s.task_id, s.answer, s.is_code)
           for path in (flat, chat) for s in read_solutions(path)]
    assert got == [(1, "row", "coin_change", "print(1)", False),
                   (2, "row", "humaneval/0", "x = 1", True),
                   (1, "row", None, [{"role": "assistant", "content": "hi"}], False)]


def test_a_parquet_files_bad_rows_and_null_patches(tmp_path):
    both = _parquet(tmp_path / "both.parquet",
                    [{"task_id": "a", "completion": "x", "code": None},
                     {"task_id": "a", "completion": "x", "code": "y"}])
    with pytest.raises(SolutionsFileError, match=r"both.parquet row 2: give 'completion' or "
                                                 r"'code', not both"):
        list(read_solutions(both))
    swe = _parquet(tmp_path / "preds.parquet",
                   [{"instance_id": "repo__1", "model_patch": None, "model_name_or_path": "m"}])
    [line] = read_solutions(swe)
    assert (line.task_id, line.answer, line.is_code) == ("repo__1", "", True)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(SolutionsFileError, match="cannot read .*broken.parquet as Parquet"):
        list(read_solutions(broken))
