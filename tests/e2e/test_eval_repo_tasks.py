"""`deepgym-ray eval` on repository tasks: SWE-bench's predictions file and run report for
swebench_pro rows, and a folder of Harbor tasks for terminal_bench_2, on the Docker engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import cli

pytestmark = pytest.mark.e2e
pytest.importorskip("swebench", reason="grading needs the swebench extra (setup.sh installs it)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def fixture_image():
    import docker
    from helpers.docker_engine import TEST_IMAGE, docker_skip_reason

    from deepgym_ray.images import ensure_image
    from deepgym_ray.repo_tasks import ImageRecipe

    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    recipe = ImageRecipe.from_folder(FIXTURES / "swe" / "image", BASE_IMAGE=TEST_IMAGE)
    return ensure_image(docker.from_env().api, recipe)


def test_swebench_predictions_give_swebench_s_report(tmp_path, fixture_image):
    rows = [json.loads(line) for line in (FIXTURES / "swe" / "tasks.jsonl").read_text()
            .splitlines()]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({**row, "image_name": fixture_image}) + "\n"
                            for row in rows))
    predictions = [  # SWE-bench's own predictions format
        {"instance_id": rows[0]["instance_id"], "model_patch": rows[0]["patch"],
         "model_name_or_path": "gold"},
        {"instance_id": rows[1]["instance_id"], "model_patch": "",
         "model_name_or_path": "gold"},
        {"instance_id": rows[2]["instance_id"], "model_patch": rows[0]["patch"],
         "model_name_or_path": "gold"},  # another task's fix: applies, resolves nothing
    ]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    report = tmp_path / "report.json"
    proc = cli("eval", "swebench_pro", "--path", data, "--solutions", preds, "--mode", "docker",
               "--backend", "threads", "--report", report, "--no-progress",
               env={"DEEPGYM_DOCKER_IMAGE": None})
    assert proc.returncode == 0, proc.stderr  # every run judged (no --fail-under)
    written = json.loads(report.read_text())
    assert written["resolved_ids"] == [rows[0]["instance_id"]]
    assert written["empty_patch_ids"] == [rows[1]["instance_id"]]
    assert written["unresolved_ids"] == [rows[2]["instance_id"]]
    assert written["error_ids"] == [] and written["submitted_instances"] == 3
    assert "1 resolved, 1 unresolved, 1 empty, 0 errors" in proc.stderr


def test_swebench_without_its_data_says_how_to_pass_it():
    proc = cli("eval", "swebench_pro", "--reference", "--mode", "docker")
    assert proc.returncode == 2 and "--path" in proc.stderr, proc.stderr


def test_harbor_task_folder_scores_its_reference_solutions(fixture_image):
    proc = cli("eval", "terminal_bench_2", "--path", FIXTURES / "terminal_bench", "--reference",
               "--mode", "docker", "--backend", "threads", "--no-progress", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["passed"] == summary["total"] == 3, summary
