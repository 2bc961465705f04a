"""The environment docs/writing_environments.md builds, scored for real, and the folder rules it
states: the example's reference scores 1.0 from the command line, wrong answers score 0 with
each case saying why, the page shows the example's files as they are, and a metadata.json
``name`` other than the folder's is a warning naming the folder's name as the one used.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from helpers.cli import cli, write_jsonl

from deepgym_ray.envs.registry import load_folder
from deepgym_ray.suites import load_environment

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "envs"
EXAMPLE = EXAMPLES / "two_sum"
PAGE = ROOT / "docs" / "writing_environments.md"
LOCAL = ("--mode", "local", "--backend", "threads", "--no-progress")
TUPLE_ANSWER = "def two_sum(nums, target):\n    return (0, 1)\n"  # right for one case, wrong type


def test_the_example_suite_scores_its_reference_from_the_command_line():
    proc = cli("eval", EXAMPLES, "--reference", *LOCAL)
    assert proc.returncode == 0, proc.stderr
    assert "Runs: 1 (judged 1, no verdict 0)" in proc.stdout
    assert "Pass Rate: 100.00%" in proc.stdout


def test_wrong_answers_score_zero_from_a_solutions_file(tmp_path):
    solutions = write_jsonl(tmp_path / "s.jsonl", [
        {"task_id": "two_sum", "code": TUPLE_ANSWER},
        {"task_id": "two_sum", "completion": "```python\ndef two_sum(nums, target):\n"
                                             "    return []\n```"}])
    proc = cli("eval", EXAMPLES, "--solutions", solutions, *LOCAL)
    assert proc.returncode == 0, proc.stderr
    assert "Runs: 2 (judged 2, no verdict 0)" in proc.stdout
    assert "Pass Rate: 0.00%" in proc.stdout
    assert "Average Score: 0.0000" in proc.stdout


def test_each_failed_case_says_why(local_client):
    env = load_environment(str(EXAMPLE))
    assert env.name == "two_sum" and env.test_cases is not None
    reference = local_client.run(env, env.reference_solution)
    assert (reference.score, reference.passed) == (1.0, True)
    assert reference.details == "6/6 cases passed"
    wrong = local_client.run(env, TUPLE_ANSWER)
    assert (wrong.score, wrong.passed, wrong.has_verdict) == (0.0, False, True)
    first = wrong.cases[0]
    assert first.id == "example_1" and first.input == "nums=[2, 7, 11, 15], target=9"
    assert first.error == "two_sum([2, 7, 11, 15], 9): expected [0, 1], got (0, 1)"


def test_the_page_shows_the_example_files_as_they_are():
    page = PAGE.read_text(encoding="utf-8")
    files = sorted(p.name for p in EXAMPLE.iterdir() if p.is_file())
    assert files == ["metadata.json", "reference_solution.py", "task.md", "test_cases.json",
                     "verifier.py"]
    for name in files:
        assert (EXAMPLE / name).read_text(encoding="utf-8") in page, name


def test_a_metadata_name_other_than_the_folders_is_a_warning(tmp_path, caplog):
    renamed = tmp_path / "pair_sum"
    shutil.copytree(EXAMPLE, renamed)  # metadata.json still says "two_sum"
    with caplog.at_level(logging.WARNING, logger="deepgym_ray.envs.registry"):
        env = load_folder(renamed)
    assert env.name == "pair_sum"
    [record] = [r for r in caplog.records if r.name == "deepgym_ray.envs.registry"]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "'two_sum'" in message and "'pair_sum'" in message and "folder" in message


def test_a_metadata_name_equal_to_the_folders_is_silent(caplog):
    with caplog.at_level(logging.WARNING, logger="deepgym_ray.envs.registry"):
        assert load_folder(EXAMPLE).name == "two_sum"
    assert not [r for r in caplog.records if r.name == "deepgym_ray.envs.registry"]
