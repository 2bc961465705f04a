"""A new user's walk through the README, checked: its first command runs and prints what the
README shows, its test command is CI's, the configs it and ``--config``'s help list are the
shipped ones, its solutions-file lines are read as it says, its verifier snippet judges, and
every document it links to exists with the section it names.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from helpers.cli import cli

from deepgym_ray.cli.options import add_client_options
from deepgym_ray.cli.solutions_file import read_solutions
from deepgym_ray.config import named_configs
from deepgym_ray.models import Environment
from deepgym_ray.suites import load_environment

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAIN = ".venv/bin/deepgym-ray eval humaneval --reference --backend ray"
TESTS = ".venv/bin/python -m pytest"


def _blocks(language: str) -> list[str]:
    """The README's fenced blocks opened with ```language (``""``: untyped), in order."""
    blocks, current, kind = [], None, None
    for line in README.splitlines():
        if current is None and line.startswith("```"):
            current, kind = [], line[3:].strip()
        elif current is not None and line == "```":
            if kind == language:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_two_commands_lead_and_the_second_is_cis():
    first, second = [line for line in _blocks("bash")[0].splitlines()
                     if line and not line.startswith("#")]
    assert first == f"bash scripts/setup.sh && {MAIN}"
    assert second == f"bash scripts/setup.sh && {TESTS}"
    assert README.index(first) < README.index("## Use it")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert any(line.startswith(f"{second} ") for line in ci.splitlines())  # `... || status=$?`


@pytest.mark.e2e
def test_the_first_command_prints_what_the_readme_shows():
    proc = cli(*MAIN.split()[1:], "--no-progress", timeout=900)
    assert proc.returncode == 0, proc.stderr
    sample = _blocks("")[0]  # the first untyped block: the sample output
    for line in proc.stdout.splitlines():
        assert line in sample, line
    assert "Pass Rate: 100.00%" in proc.stdout


def test_the_shipped_configs_are_the_ones_listed():
    shipped = named_configs()
    assert shipped == ["cluster", "daytona", "docker", "e2b", "local", "modal"]
    sentence = README[README.index("`--config NAME` takes"):][:120]
    assert all(f"`{name}`" in sentence for name in shipped), sentence
    parser = argparse.ArgumentParser()
    add_client_options(parser)
    assert f"({', '.join(shipped)})" in " ".join(parser.format_help().split())


def test_the_solutions_file_lines_are_read_and_scored_as_described(tmp_path):
    [block] = [b for b in _blocks("json") if '"task_id"' in b]
    path = tmp_path / "samples.jsonl"
    path.write_text(block, encoding="utf-8")
    lines = list(read_solutions(path))
    assert [(s.task_id, s.is_code) for s in lines] == [
        ("coin_change", False), ("coin_change", False), ("knapsack_01", True)]
    assert isinstance(lines[1].answer, list)  # a conversation
    proc = cli("eval", "builtin", "--solutions", path, "--mode", "local", "--backend", "threads",
               "--no-progress", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["total"], summary["passed"], summary["no_verdict"]) == (3, 0, 0), summary


def test_the_verifier_snippet_judges(local_client):
    [snippet] = [b for b in _blocks("python") if "score_cases" in b]
    env = Environment(name="readme_snippet", verifier_code=snippet)
    right = local_client.run(env, load_environment("coin_change").reference_solution)
    assert (right.score, right.passed, right.details) == (1.0, True, "2/2 cases passed")
    wrong = local_client.run(env, "def coin_change(coins, amount):\n    return -1\n")
    assert (wrong.score, wrong.has_verdict) == (0.5, True)


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", ["README.md", "docs/internals.md",
                                 "docs/writing_environments.md"])
def test_every_link_and_named_file_exists(doc):
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)]+)\)", text):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve()
        assert linked.exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            assert anchor in {_anchor(h) for h in headings}, target
    for named in re.findall(r"`((?:examples|docs|scripts|tests|bench)/[\w./-]+)`", text):
        assert (ROOT / named).exists(), named


def test_the_session_snippet_runs(capsys):
    block = next(b for b in _blocks("python") if "dg.session(" in b)
    calculator = json.loads(load_environment("fix_the_calculator").reference_solution)
    actions = iter(json.loads(load_environment("sales_report").reference_solution))
    namespace = {"fixed": calculator[1]["content"], "my_agent": lambda observation: next(actions)}
    exec(compile(block, "README.md", "exec"), namespace)
    namespace["dg"].close()
    printed = capsys.readouterr().out
    assert "calculator.py" in printed and "score=1.0" in printed, printed
    assert next(actions, None) is None  # the agent ran its episode to its end
