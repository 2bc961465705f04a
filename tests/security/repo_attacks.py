"""Attacks on repository tasks (tests/fixtures/swe and tests/fixtures/terminal_bench), for the
security battery's repository-task modules: each module is one attack, its tests run it on the
Docker provider (the only one that runs repository tasks) and assert a judged 0 whose answer
would have scored 1.0 had the attack worked."""

from __future__ import annotations

import functools
from pathlib import Path

from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.suites.swebench import load_swebench
from deepgym_ray.suites.terminal_bench import load_terminal_bench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# What a right answer to count-log-errors computes; an attack that learns it from where it
# should not (the hidden tests, the network) scores 1.0.
RIGHT_COUNT = "cut -d ' ' -f 3 {log} | grep -cx ERROR > /app/answer.txt"


@functools.cache
def swe_env(image: str):
    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=image)
    return load_swebench(FIXTURES / "swe" / "tasks.jsonl", recipe=recipe, timeout=120)[0]


@functools.cache
def terminal_env(image: str):
    envs = load_terminal_bench(FIXTURES / "terminal_bench", BASE_IMAGE=image)
    return next(env for env in envs if env.name.endswith("count-log-errors"))


def new_file(path: str, text: str) -> str:
    lines = text.splitlines(True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}" for line in lines))


def patch_attack(client, diff: str, error_type: str = "test_infra_tampering") -> None:
    """The gold patch plus ``diff`` is refused with ``error_type``, a judged 0."""
    from helpers.docker_engine import TEST_IMAGE

    env = swe_env(TEST_IMAGE)
    result = client.run(env, env.patch_task.gold_patch + diff)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == error_type, result


def terminal_attack(client, script: str, error_type: str | None = None) -> None:
    """``script`` scores a judged 0 on count-log-errors (with ``error_type``)."""
    from helpers.docker_engine import TEST_IMAGE

    result = client.run(terminal_env(TEST_IMAGE), script)
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == error_type, result
