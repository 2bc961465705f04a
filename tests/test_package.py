"""The package imports cheaply and exposes its public names."""

from __future__ import annotations

import subprocess
import sys

import deepgym_ray


def test_import_starts_nothing_heavy():
    code = (
        "import sys, deepgym_ray\n"
        "from deepgym_ray import RunResult, Environment, completion_to_code\n"
        "heavy = [m for m in ('ray', 'docker', 'torch', 'trl') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_export_resolves():
    for name in deepgym_ray.__all__:
        assert getattr(deepgym_ray, name) is not None, name


def test_unknown_attribute_is_an_attribute_error():
    try:
        deepgym_ray.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_cli_prints_its_version():
    out = subprocess.run(
        [sys.executable, "-m", "deepgym_ray.cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert deepgym_ray.__version__ in out.stdout
