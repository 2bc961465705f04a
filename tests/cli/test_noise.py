"""What a user sees besides the results: no Ray start-up chatter in the progress bar line,
no setuptools deprecation warnings when the package is set up."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from helpers.cli import cli

ROOT = Path(__file__).resolve().parents[2]
RAY_CHATTER = ("Token authentication is", "Started a local Ray instance")


def test_ray_start_chatter_goes_to_our_log_not_the_console(caplog):
    from deepgym_ray.pool.connect import _ray_start_chatter_to_our_log

    printed = []

    class Console(logging.Handler):  # Ray's own handler, as ray.init installs it
        def emit(self, record):
            printed.append(record.getMessage())

    ray_logger = logging.getLogger("ray._private.worker")
    console = Console()
    ray_logger.addHandler(console)
    try:
        with caplog.at_level(logging.INFO, logger="deepgym_ray.pool.connect"):
            with _ray_start_chatter_to_our_log():
                ray_logger.warning("Started a local Ray instance.")
                ray_logger.warning("something else Ray says")
                logging.getLogger(
                    "ray._private.authentication.authentication_token_setup").warning(
                    "Token authentication is enabled for this Ray cluster.")
            ray_logger.warning("Started a local Ray instance.")  # outside: untouched
    finally:
        ray_logger.removeHandler(console)
    assert printed == ["something else Ray says", "Started a local Ray instance."]
    ours = [r.getMessage() for r in caplog.records if r.name == "deepgym_ray.pool.connect"]
    assert ours == ["ray: Started a local Ray instance.",
                    "ray: Token authentication is enabled for this Ray cluster."]


def test_an_embedded_eval_prints_no_ray_chatter_in_its_progress_bar():
    # The progress bar is on (no --no-progress); Ray starts its own instance here, with its
    # default token authentication (RAY_AUTH_MODE unset), which it warns about.
    proc = cli("eval", "coin_change", "--reference", "--mode", "local", "--max-parallel", "1",
               env={"RAY_AUTH_MODE": None})
    assert proc.returncode == 0, proc.stderr
    assert "eval coin_change" in proc.stderr  # the bar
    for chatter in RAY_CHATTER:
        assert chatter not in proc.stderr and chatter not in proc.stdout, proc.stderr
    assert "Pass Rate: 100.00%" in proc.stdout


def test_setup_gives_no_setuptools_deprecation_warnings(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import setuptools; setuptools.setup()",
         "egg_info", "--egg-base", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Deprecat" not in proc.stderr, proc.stderr
    info = next(tmp_path.glob("*.egg-info")) / "PKG-INFO"
    assert "License-Expression: Apache-2.0" in info.read_text()
