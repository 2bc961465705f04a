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


def test_the_response_follows_the_prompt_wherever_padding_put_it():
    pytest.importorskip("ray.serve")
    from deepgym_ray.integrations.serve_app import _response_of

    prompt = "<|im_start|>user\nsolve<|im_end|>\n<|im_start|>assistant\n"
    answer = "```python\nx = 1\n```<|im_end|>"
    assert _response_of(prompt + answer, prompt) == answer
    # OpenRLHF 0.9 decodes a left-padded batch: the prompt comes after the padding.
    assert _response_of("<|endoftext|>" * 3 + prompt + answer, prompt) == answer
    assert _response_of("other text", prompt) == "other text"


def test_a_one_environment_service_refuses_a_label_naming_another_environment():
    pytest.importorskip("ray.serve")
    from deepgym_ray.integrations.serve_app import (
        _known_names,
        _other_environment,
        _served_names,
    )

    served, known = _served_names(ServeSettings(env="coin_change")), _known_names()
    assert _other_environment("knapsack_01", served, known) == "knapsack_01"
    assert _other_environment("humaneval", served, known) == "humaneval"
    assert _other_environment({"env_name": "nope"}, served, known) == "nope"
    for label in ("coin_change", {"env_name": "coin_change"}, "42", 42, None, [1, 2]):
        assert _other_environment(label, served, known) is None, label  # ground truth is left alone
    assert _served_names(ServeSettings(mixed="m.yaml")) is None  # a mixture routes by label


def test_a_tokenizers_own_special_tokens_are_read(tmp_path):
    pytest.importorskip("transformers")
    from deepgym_ray.integrations.rows import special_tokens_of
    from deepgym_ray.integrations.tiny import build_tiny_model

    path = build_tiny_model(tmp_path / "tiny", hidden_size=8, num_layers=1)
    assert {"<|im_start|>", "<|im_end|>", "<|endoftext|>"} <= set(special_tokens_of(str(path)))
    with pytest.raises(ValueError, match="cannot load the tokenizer"):
        special_tokens_of(str(tmp_path / "missing"))


def test_the_serve_command_refuses_a_tokenizer_it_cannot_load(tmp_path, capsys):
    assert main(["serve", "--env", "coin_change", "--tokenizer", str(tmp_path / "none")]) == 2
    assert "cannot load the tokenizer" in capsys.readouterr().err


def test_a_service_whose_port_refuses_connections_stops_its_command():
    import socket

    from deepgym_ray.integrations.serve import ServiceStopped, watch_service

    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = ServeSettings(env="coin_change", port=port)
    with pytest.raises(ServiceStopped, match=f"port {port} refuses connections"):
        watch_service(settings, interval_s=0.01, strikes=2)


@pytest.mark.parametrize(("argv", "message"), [
    (["--no-verdict-score", "nan"], "no_verdict_score must be a finite number, got nan"),
    (["--port", "99999"], "port: Input should be less than or equal to 65535, got 99999"),
    (["--max-body-mb", "0"], "max_body_mb: Input should be greater than or equal to 1, got 0"),
])
def test_bad_serve_settings_are_one_plain_line(capsys, argv, message):
    assert main(["serve", "--env", "coin_change", *argv]) == 2
    err = capsys.readouterr().err
    assert f"invalid serve settings: {message}" in err
    assert "pydantic" not in err and len(err.strip().splitlines()) == 1


def test_a_session_id_is_an_actors_ascii_index_and_an_id():
    pytest.importorskip("ray.serve")
    from deepgym_ray.integrations.serve_sessions import _address

    assert _address("0.pool-abc") == (0, "pool-abc")
    assert _address("01.pool-abc") == (1, "pool-abc")  # one session however it is spelled
    for bad in ("\u00b2.abc", "\u0663.abc", "-1.abc", "x.abc", "0.", "abc", ".abc"):
        with pytest.raises(KeyError, match="no session"):
            _address(bad)


def test_a_session_names_its_environment_never_a_folder_of_the_servers():
    pytest.importorskip("ray.serve")
    from deepgym_ray.envs.registry import MULTI_TURN_DIR
    from deepgym_ray.integrations.serve_sessions import _named_environment

    assert _named_environment("sales_report").name == "sales_report"
    for path in ("/etc", "../../etc", "~", str(MULTI_TURN_DIR / "sales_report")):
        with pytest.raises(ValueError, match="never a folder"):
            _named_environment(path)
