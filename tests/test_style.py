"""The code base stays ruff clean (the style check runs with the tests, so CI enforces it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it comes with the test extra)")
    out = subprocess.run(
        [ruff, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
