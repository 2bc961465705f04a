"""Attacks on repository tasks (tests/fixtures/swe and tests/fixtures/terminal_bench), for the
security battery's repository-task modules. Each module is one attack (its ``TAGS`` go to
RELIABILITY.md), run on the Docker provider (the only one that runs repository tasks) two
ways, as the battery runs every attack: alone (``DeepGym.run``, each of its variants), and in
a batch on the Ray pool beside a right answer, which must still score 1.0. Every variant must
be a judged 0 that would have scored 1.0 had the attack worked: a patch attack is added to the
gold patch, or (``with_gold=False``) is the whole answer, leaving the bug unfixed, when what it
forges is a pass of the task's failing tests."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from helpers.swe_patches import FORCE_PASSES, edit, new_file  # noqa: F401 - for the attacks

from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.suites.swebench import load_swebench
from deepgym_ray.suites.terminal_bench import load_harbor_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# What a right answer to count-log-errors computes; an attack that learns it from where it
# should not (the hidden tests, the network) scores 1.0.
RIGHT_COUNT = "cut -d ' ' -f 3 {log} | grep -cx ERROR > /app/answer.txt"


@functools.cache
def swe_env(image: str):
    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=image)
    return load_swebench(FIXTURES / "swe" / "tasks.jsonl", recipe=recipe, timeout=120)[0]


@functools.cache
def terminal_env(image: str, task: str = "count-log-errors"):
    """The fixture task ``task`` (a folder under tests/fixtures/terminal_bench)."""
    return load_harbor_task(FIXTURES / "terminal_bench" / task, BASE_IMAGE=image)


def _judged_zero(result, error_type: str | None) -> None:
    assert result.has_verdict and result.score == 0.0, result
    assert result.error_type == error_type, result


def patch_attack(client, diffs: list[str], error_type: str | None = "test_infra_tampering",
                 with_gold: bool = True) -> None:
    """The gold patch plus each of ``diffs`` (or each alone: ``with_gold=False``) is a judged
    0 with ``error_type`` (None: the tests ran and failed)."""
    from helpers.docker_engine import TEST_IMAGE

    env = swe_env(TEST_IMAGE)
    prefix = env.patch_task.gold_patch if with_gold else ""
    for diff in diffs:
        _judged_zero(client.run(env, prefix + diff), error_type)


def patch_batch(pool_client, diffs: list[str], error_type: str | None = "test_infra_tampering",
                with_gold: bool = True):
    """The same, in one pool map beside the gold patch alone (which still resolves)."""
    from helpers.docker_engine import TEST_IMAGE

    env = swe_env(TEST_IMAGE)
    gold = env.patch_task.gold_patch
    prefix = gold if with_gold else ""
    results = pool_client.eval([env] * (len(diffs) + 1), [prefix + d for d in diffs] + [gold])
    assert results.results[-1].score == 1.0, results.results[-1]
    for result in results.results[:-1]:
        _judged_zero(result, error_type)


def terminal_attack(client, scripts: list[str], error_type: str | None = None,
                    task: str = "count-log-errors") -> None:
    """Each of ``scripts`` scores a judged 0 on the fixture ``task`` (with ``error_type``)."""
    from helpers.docker_engine import TEST_IMAGE

    for script in scripts:
        _judged_zero(client.run(terminal_env(TEST_IMAGE, task), script), error_type)


def terminal_batch(pool_client, scripts: list[str], error_type: str | None = None,
                   task: str = "count-log-errors") -> None:
    """The same, in one pool map beside the reference solve.sh (which still scores 1.0)."""
    from helpers.docker_engine import TEST_IMAGE

    env = terminal_env(TEST_IMAGE, task)
    results = pool_client.eval([env] * (len(scripts) + 1),
                               [*scripts, env.terminal_task.solution])
    assert results.results[-1].score == 1.0, results.results[-1]
    for result in results.results[:-1]:
        _judged_zero(result, error_type)


def attack_tests(kind: str, answers: list[str], error_type: str | None = None, *,
                 with_gold: bool = True, task: str = "count-log-errors"):
    """An attack module's two tests, as the battery runs every attack: ``test_alone`` (each
    answer through ``DeepGym.run``) and ``test_in_batch`` (all of them in one pool map beside
    a right answer). ``kind``: ``"patch"`` (answers are diffs added to the gold patch, refused
    with ``error_type``, ``test_infra_tampering`` by default; with ``with_gold=False`` they are
    whole answers that leave the bug unfixed, judged 0 with ``error_type``, None by default:
    the tests ran and failed) or ``"terminal"`` (answers are scripts for the fixture task
    ``task``, a folder under tests/fixtures/terminal_bench). Use:
    ``test_alone, test_in_batch = attack_tests(...)``.
    """
    options = {}
    if kind == "patch":
        alone, batch = patch_attack, patch_batch
        error_type = error_type or ("test_infra_tampering" if with_gold else None)
        options = {"with_gold": with_gold}
    else:
        alone, batch = terminal_attack, terminal_batch
        options = {"task": task}

    @pytest.mark.parametrize("provider", ["docker"])
    def test_alone(docker_client, provider):
        alone(docker_client, answers, error_type, **options)

    @pytest.mark.parametrize("provider", ["docker"])
    def test_in_batch(repo_pool, provider):
        batch(repo_pool, answers, error_type, **options)

    return test_alone, test_in_batch
