"""A patch adds what Python loads at start-up from the repository (sitecustomize.py,
usercustomize.py, a .pth file, pytest.ini with a plugin): found first when an image puts the
repository on PYTHONPATH or installs it in development mode."""

from repo_attacks import attack_tests, new_file

TAGS = ('repository', 'startup', 'forged-pass')
DIFFS = [new_file(path, text) for path, text in (
    ("sitecustomize.py", "import os\nos._exit(0)\n"),
    ("usercustomize.py", "import os\nos._exit(0)\n"),
    ("minicalc/zz.pth", "import os; os._exit(0)\n"),
    ("pytest.ini", "[pytest]\naddopts = -p minicalc.plugin\n"),
    ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-x'\n"),
)]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
