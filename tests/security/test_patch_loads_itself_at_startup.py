"""A patch adds what Python loads at start-up from the repository (sitecustomize.py,
usercustomize.py, a .pth file, pytest.ini with a plugin): found first when an image puts the
repository on PYTHONPATH or installs it in development mode."""

import pytest
from repo_attacks import new_file, patch_attack

FILES = {
    "sitecustomize": ("sitecustomize.py", "import os\nos._exit(0)\n"),
    "usercustomize": ("usercustomize.py", "import os\nos._exit(0)\n"),
    "pth": ("minicalc/zz.pth", "import os; os._exit(0)\n"),
    "pytest_ini": ("pytest.ini", "[pytest]\naddopts = -p minicalc.plugin\n"),
    "pyproject": ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-x'\n"),
}


@pytest.mark.parametrize("provider", ["docker"])
@pytest.mark.parametrize("kind", list(FILES))
def test_alone(docker_client, provider, kind):
    patch_attack(docker_client, new_file(*FILES[kind]))
