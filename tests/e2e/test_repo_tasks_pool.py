"""Repository tasks through the Ray pool on Docker: a task's image is built on the node by its
builder actor, once per content hash however many actors ask at once, and a failed build is no
verdict for every run that needed it (never retried into a second build)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.suites.swebench import load_swebench

pytestmark = pytest.mark.e2e
pytest.importorskip("swebench", reason="grading needs the swebench extra (setup.sh installs it)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swe"


def _derived(base_tag: str, line: str) -> ImageRecipe:
    """A recipe of its own (a fresh tag) on top of the fixture image: built in a second."""
    return ImageRecipe(dockerfile=f"FROM {base_tag}\nLABEL deepgym.test={uuid.uuid4().hex}\n"
                                  f"{line}")


def test_one_build_per_hash_per_node_however_many_actors_ask(repo_pool, ray_local):
    import docker
    from helpers.docker_engine import TEST_IMAGE

    from deepgym_ray.images import ensure_image
    from deepgym_ray.pool.image_builders import node_builder

    api = docker.from_env().api
    base = ensure_image(api, ImageRecipe.from_folder(FIXTURES / "image", BASE_IMAGE=TEST_IMAGE))
    recipe = _derived(base, "")
    envs = load_swebench(FIXTURES / "tasks.jsonl", recipe=recipe, timeout=120)
    gold = [env.patch_task.gold_patch for env in envs]
    try:
        batch = repo_pool.eval(envs * 2, gold * 2)  # 6 runs, 4 at once on 2 actors
        assert [r.score for r in batch.results] == [1.0] * 6, batch.results
        builds = ray_local.get(node_builder().builds.remote())
        assert builds.get(recipe.tag) == 1, builds
    finally:
        api.remove_image(recipe.tag, force=True)


def test_a_failed_build_is_no_verdict_for_every_run_that_needed_it(repo_pool, ray_local):
    from helpers.docker_engine import TEST_IMAGE

    from deepgym_ray.pool.image_builders import node_builder

    recipe = ImageRecipe(dockerfile=f"FROM {TEST_IMAGE}\nLABEL x={uuid.uuid4().hex}\n"
                                    "RUN echo broken-on-purpose && exit 7\n")
    envs = load_swebench(FIXTURES / "tasks.jsonl", recipe=recipe, timeout=120)
    batch = repo_pool.eval(envs, [env.patch_task.gold_patch for env in envs])
    assert all(not r.has_verdict and r.error_type == "image_build_error"
               for r in batch.results), batch.results
    assert all("broken-on-purpose" in r.details for r in batch.results)
    builds = ray_local.get(node_builder().builds.remote())
    assert builds.get(recipe.tag) == 1, builds  # its error served the other runs
