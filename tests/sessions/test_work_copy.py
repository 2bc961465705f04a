"""A session verifier judges a copy of the agent's work directory (deepgym_workcopy), with the
copy as its current directory, as DeepGym runs session verifiers: relative paths mean the
agent's files, links become copies of the files they name inside the tree or are left out
(named in the result), what the agent made unreadable is still read, a tree over its bounds is
the agent's 0, and a verifier failing on a path of the work directory dates the agent's work
in play. On the local sandbox and on Docker."""

from __future__ import annotations

import pytest
from helpers.episodes import answer_env

from deepgym_ray.sessions import Action
from deepgym_ray.suites import load_environment


@pytest.fixture(params=["local", "docker"])
def client(request):
    return request.getfixturevalue(f"{request.param}_client")


def bash(command: str) -> Action:
    return Action(action_type="bash", content=command)


def episode(client, env, *commands: str):
    with client.session(env) as session:
        session.start()
        for command in commands:
            session.step(bash(command))
        return session.score()


# As DeepGym's session verifiers are written: a script, its current directory the agent's work
# directory, the agent's module loaded by a relative path.
DEEPGYM_SCRIPT = '''
import json
from deepgym_solution import load_solution

stats = load_solution("stats.py")
right = stats.mean([1, 2, 3, 6]) == 3 and stats.spread([4, 1, 9]) == 8
print(json.dumps({"score": 1.0 if right else 0.0, "passed": right}))
'''
STATS = ("def mean(xs):\n    return sum(xs) / len(xs)\n\n"
         "def spread(xs):\n    return max(xs) - min(xs)\n")


def test_a_deepgym_script_verifier_loads_the_agents_module_by_a_relative_path(client):
    env = answer_env(DEEPGYM_SCRIPT)
    with client.session(env) as session:
        session.start()
        session.step(Action(action_type="write_file", path="stats.py", content=STATS))
        result = session.score()
    assert result.score == 1.0 and result.passed, result


# The verifier's view: where it runs, what it sees, that nothing in it is a link.
VIEW = '''
import os

def verify(work_dir, test_cases_path=None):
    names = sorted(os.listdir("."))
    links = [n for n in names if os.path.islink(n)]
    with open("latest.txt") as f:
        latest = f.read().strip()
    with open("locked.txt") as f:
        locked = f.read().strip()
    right = (os.getcwd() == work_dir and latest == "v2" and locked == "42" and not links
             and "out.txt" not in names and os.stat("run.sh").st_mode & 0o111)
    return {"score": 1.0 if right else 0.0, "details": f"{os.getcwd()} {names} {latest!r}"}
'''


def test_the_verifier_reads_a_copy_without_links_in_its_current_directory(client):
    result = episode(client, answer_env(VIEW),
                     "mkdir out && echo v2 > out/v2.txt && ln -s out/v2.txt latest.txt",
                     "ln -s /etc/hostname host.txt && ln -s out up && mkfifo pipe",
                     "echo 42 > locked.txt && chmod 000 locked.txt",
                     "printf 'echo hi\\n' > run.sh && chmod 755 run.sh")
    assert result.score == 1.0, result
    # what was left out is named, with why
    assert "host.txt (a link to /etc/hostname (absolute))" in result.details
    assert "up (a link to out (not a file of the tree))" in result.details
    assert "pipe (not a file, directory or link)" in result.details


def test_a_tree_over_its_bounds_is_the_agents_zero_and_names_the_bound(client):
    deep = "/".join(["d"] * 70)
    result = episode(client, answer_env(), f"mkdir -p {deep} && echo 42 > answer.txt")
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "policy_sandbox_failure"
    assert "more than 64 directories deep" in result.details


# Fails on a path of the work directory without opening it: os.stat has no audit event.
STATS_THE_OUTPUT = '''
import os

def verify(work_dir, test_cases_path=None):
    size = os.path.getsize(os.path.join(work_dir, "output.bin"))
    return 1.0 if size == 42 else 0.0
'''


def test_a_verifier_failing_on_a_path_of_the_work_is_the_agents_zero(client):
    result = episode(client, answer_env(STATS_THE_OUTPUT), "echo nothing > notes2.txt")
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == "solution_error"


def test_a_link_the_verifier_would_resolve_elsewhere_is_a_judged_zero(client):
    # The built-in sales_report: report.json made a link to the verifier's own directory
    # raised IsADirectoryError before the verifier had read anything of the agent's (no
    # verdict); now the link is left out and the report is missing: a judged 0.
    env = load_environment("sales_report")
    result = episode(client, env, "ln -s /proc/self/cwd report.json")
    assert result.has_verdict and result.score == 0.0, result
    assert "report.json (a link to /proc/self/cwd (absolute))" in result.details


# What the agent's code writes while the verifier runs goes to the agent's own directory (its
# processes run there); the copy the verifier reads stays as the agent left it.
RUNS_THE_SCRIPT = '''
import os
from deepgym_solution import read_output, run_solution

def verify(work_dir, test_cases_path=None):
    run = run_solution(os.path.join(work_dir, "make.py"))
    made = read_output("made.txt", root=work_dir)
    right = run.exit_code == 0 and made.strip() == "42" \\
        and not os.path.exists(os.path.join(work_dir, "made.txt"))
    return {"score": 1.0 if right else 0.0, "details": f"{run!r} {made!r}"}
'''


def test_the_agents_code_run_by_the_verifier_writes_to_its_own_directory(client):
    env = answer_env(RUNS_THE_SCRIPT)
    with client.session(env) as session:
        session.start()
        session.step(Action(action_type="write_file", path="make.py",
                            content="open('made.txt', 'w').write('42')\n"))
        result = session.score()
    assert result.score == 1.0, result


CAPABILITIES = '''
def verify(work_dir, test_cases_path=None):
    with open("/proc/self/status") as f:
        held = [line.split()[1] for line in f if line.startswith(("CapEff", "CapPrm"))]
    with open("answer.txt") as f:
        right = f.read().strip() == "42"
    return {"score": 1.0 if right else 0.0, "details": " ".join(held)}
'''


def test_on_docker_the_verifier_reads_what_the_agent_locked_but_holds_no_right_to(
        docker_client):
    # The runner copied answer.txt (mode 000) with CAP_DAC_READ_SEARCH, then gave it up: the
    # verifier holds CAP_KILL alone (its solution processes are another uid's).
    result = episode(docker_client, answer_env(CAPABILITIES),
                     "echo 42 > answer.txt && chmod 000 answer.txt")
    assert result.score == 1.0, result
    assert result.details.split() == ["0000000000000020", "0000000000000020"], result.details
