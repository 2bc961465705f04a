"""What the tests share, in one place: each module serves the tests of one part of the package.

``tests/`` is on ``sys.path`` in every test run (``tests/conftest.py`` sits there with no
``__init__.py`` beside it), so any test, in any folder, imports ``from helpers.cli import cli``;
a script or subprocess a test starts puts :data:`TESTS_DIR` on its path first. The modules'
names say what they help with, so none can shadow a package of the same name (``ray``,
``docker``) if ``helpers/`` itself ever lands on a path.

- ``cli``: the real ``deepgym-ray`` entry point run as a process, an answer-42 environment,
  an environment that never gives a verdict
- ``ray_cluster``: the session's local Ray and a real three-node cluster
- ``pool_providers``: scripted, flaky and gated sandbox providers for the pool
- ``local_sandbox``: a local provider that records its runs, and what they left on the host
- ``cancel``: runs that take minutes, and the search for what of a map still runs
- ``docker_engine``: docker-mode clients on the locally built image, and why to skip
- ``remote_setup``: an environment and the provider's options for the local Daytona and E2B servers
- ``judge_probe``: an environment holding a secret, processes by marker, a forged write-back
- ``wrong_solutions``: a subtly wrong answer to every built-in environment (test data)
- ``swe_patches``: diffs against the SWE-style fixture repository (new files, edits, renames)
  and a pytest hook that forces passes
"""

from pathlib import Path

#: ``tests/``: what a subprocess puts on its path to import these helpers.
TESTS_DIR = Path(__file__).resolve().parents[1]
#: The repository's root.
ROOT = TESTS_DIR.parent
