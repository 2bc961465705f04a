"""The serve command and service pieces that need no cluster (the service itself runs in
tests/e2e/test_serve_load.py)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from deepgym_ray.cli import build_parser, main
from deepgym_ray.integrations.serve import ServeSettings
from deepgym_ray.reward.mixed_config import mixture_of


def test_settings_need_exactly_one_source_and_a_finite_no_verdict_score():
    assert ServeSettings(env="coin_change").no_verdict_score == 0.0
    with pytest.raises(ValidationError, match="exactly one"):
        ServeSettings()
    with pytest.raises(ValidationError, match="exactly one"):
        ServeSettings(env="coin_change", mixed="m.yaml")
    for bad in (math.nan, math.inf):
        with pytest.raises(ValidationError, match="finite"):
            ServeSettings(env="coin_change", no_verdict_score=bad)


def test_serve_command_parses_its_options():
    args = build_parser().parse_args(["serve", "--mixed", "m.yaml", "--host", "0.0.0.0",
                                      "--port", "9000", "--no-verdict-score", "-0.5"])
    assert (args.command, args.mixed, args.env, args.host, args.port) == \
        ("serve", "m.yaml", None, "0.0.0.0", 9000)
    assert args.no_verdict_score == -0.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve"])  # --env or --mixed is required


def test_serve_command_refuses_unknown_environments_and_bad_mixtures(tmp_path, capsys):
    assert main(["serve", "--env", "no_such_env"]) == 2
    assert "no_such_env" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("environments: []\n")
    assert main(["serve", "--mixed", str(bad)]) == 2
    assert "bad.yaml" in capsys.readouterr().err


def test_openrlhf_labels_route_like_a_dataset_row():
    pytest.importorskip("ray.serve")
    from deepgym_ray.integrations.serve_app import _label_row, _response_of

    mixed = mixture_of(["coin_change", "knapsack_01"])
    assert mixed.route_row(0, _label_row("knapsack_01")).name == "knapsack_01"
    assert mixed.route_row(0, _label_row({"env_name": "coin_change"})).name == "coin_change"
    with pytest.raises(ValueError, match="no environment"):
        mixed.route_row(0, _label_row("nope"))
    assert _response_of("PROMPT answer", "PROMPT ") == "answer"
    assert _response_of("other text", "PROMPT") == "other text"
