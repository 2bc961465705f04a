"""The swebench / swebench_pro suites: a local file of SWE-bench rows as environments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.suites import list_suites, load_environment, resolve_environments
from deepgym_ray.suites.swebench import load_swebench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swe"


def test_without_a_path_the_error_says_where_to_get_the_data():
    assert {"swebench", "swebench_pro"} <= set(list_suites())
    with pytest.raises(ValueError, match="reads a local file.*path="):
        load_environment("swebench_pro")


def test_rows_become_environments_with_their_images(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "tasks.jsonl").read_text().splitlines()]
    rows[0]["dockerhub_tag"] = "registry.example/minicalc:1"
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    recipe = ImageRecipe.from_folder(FIXTURES / "image")
    envs = resolve_environments("swebench_pro", path=path, recipe=recipe)
    assert [env.name for env in envs] == [f"swebench_pro/{r['instance_id']}" for r in rows]
    assert envs[0].image == "registry.example/minicalc:1" and envs[0].image_recipe is None
    assert envs[1].image is None and envs[1].image_recipe == recipe
    one = load_environment("swebench_pro/deepgym__minicalc-2", path=path, recipe=recipe)
    assert one == envs[1]


def test_parquet_reads_the_same_rows(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [json.loads(line) for line in (FIXTURES / "tasks.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    envs = load_swebench(tmp_path / "rows.parquet", image_template="minicalc:{version}")
    assert [env.image for env in envs] == ["minicalc:1.0"] * len(rows)
    assert envs[2].patch_task.fail_to_pass == json.loads(rows[2]["FAIL_TO_PASS"])


def test_bad_rows_and_options_are_named(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"instance_id": "x-1", "test_patch": "d"}) + "\n")
    with pytest.raises(ValueError, match="swebench row x-1: .*FAIL_TO_PASS"):
        load_swebench(path, image_template="i")
    path.write_text("[1]\n")
    with pytest.raises(ValueError, match="rows.jsonl:1: expected a JSON object"):
        load_swebench(path)
    with pytest.raises(TypeError, match="takes no options"):
        load_environment("coin_change", path=path)


def test_load_environment_gives_a_suite_of_your_files_as_one_mixture_member():
    from deepgym_ray.reward.mixed import MixedEnvironment
    from deepgym_ray.suites import Suite

    suite = load_environment("swebench_pro", path=FIXTURES / "tasks.jsonl",
                             image_template="minicalc:{version}")
    assert isinstance(suite, Suite) and suite.name == "swebench_pro" and len(suite) == 3
    mixed = MixedEnvironment(environments=[(suite, 0.6), (load_environment("coin_change"), 0.4)])
    routed = mixed.route(["a", "b"], instance_id=["deepgym__minicalc-3", None],
                         env_name=[None, "coin_change"])
    assert [env.name for env in routed] == ["swebench_pro/deepgym__minicalc-3", "coin_change"]
