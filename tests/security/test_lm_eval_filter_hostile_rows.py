"""The lm-eval filter is handed the generations of one document, of every kind a pipeline can
hand over (see row_attacks.py): each gets its own verdict, in order; a value that is no
completion gets no verdict (never a judged 0 for our plumbing, never a failed task), a
conversation is read as one, and the answer that never ends is a 0 within its own limit."""

import pytest
import yaml
from row_attacks import ENV, PROVIDER, ROWS, check_row, row_attack  # noqa: F401 - RELIABILITY.md

pytest.importorskip("lm_eval", reason="the lm_eval extra (pip install 'deepgym_ray[lm_eval]')")

TAGS = ("lm-eval", "plain-data", "time", "output")


@row_attack
def test_every_generation_gets_its_own_verdict(session_pool_local, tmp_path):
    from deepgym_ray.integrations.lm_eval import DeepGymFilter, make_lm_eval_task

    config = tmp_path / "client.yaml"
    config.write_text(yaml.safe_dump(session_pool_local.config.model_dump(mode="json")))
    make_lm_eval_task(ENV, name="deepgym_hostile_rows", config=str(config))
    docs = [{"env_name": ENV.name, "prompt": ENV.task, "native": False}] * 2
    second = [ROWS[2], ROWS[0], ROWS[1]]  # a second document: each keeps its own, in order
    generations = [[value for _, value, _ in ROWS], [value for _, value, _ in second]]

    verdicts = DeepGymFilter(task="deepgym_hostile_rows", config=str(config)).apply(
        generations, docs)

    assert [len(v) for v in verdicts] == [len(ROWS), len(second)]
    for (name, _, want), verdict in zip([*ROWS, *second], [*verdicts[0], *verdicts[1]],
                                        strict=True):
        assert set(verdict) == {"score", "passed", "has_verdict", "error_type"}, verdict
        check_row(name, want, verdict["score"], verdict["has_verdict"], verdict["error_type"])
