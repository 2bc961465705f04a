"""A verifier that deletes or rewrites its own files, and one that writes straight to fd 1:
the run's result is what the verifier returned, and the next run is untouched."""

from __future__ import annotations

import pytest
from verifier_shapes import IN_PLAY, SHAPES, env_for, expect

GOOD = "def f():\n    return 1\n"
WRONG = "def f():\n    return 2\n"

VANDAL = (IN_PLAY + "import os, shutil\n"
          "here = os.path.dirname(os.path.abspath(solution_path))\n"
          "for name in ('verifier.py', 'test_cases.json', 'data/table.txt'):\n"
          "    try:\n        os.remove(os.path.join(here, name))\n    except OSError:\n"
          "        pass\n"
          "with open(os.path.join(here, 'verifier.py'), 'w') as f:\n"
          "    f.write('def verify(p, t=None):\\n    return 1.0\\n')\n"
          "for name in os.listdir(here):\n"
          "    if name.startswith('deepgym_') and name.endswith('.py'):\n"
          "        with open(os.path.join(here, name), 'w') as f:\n"
          "            f.write('import os\\nos._exit(0)\\n')\n"
          "result = 1.0 if ok else 0.0\n")


@pytest.mark.parametrize("shape", SHAPES)
def test_deleting_and_rewriting_its_files(local_client, shape):
    env = env_for(shape, VANDAL, test_cases=[1, 2], support_files={"data/table.txt": "t"})
    for _ in range(2):  # the second run must not see the first run's damage
        expect(local_client.run(env, WRONG), score=0.0, passed=False, has_verdict=True,
               error_type=None)
        expect(local_client.run(env, GOOD), score=1.0, passed=True, has_verdict=True,
               error_type=None)


@pytest.mark.parametrize("shape", SHAPES)
def test_writing_to_fd_1_directly(local_client, shape):
    body = (IN_PLAY + "import os, subprocess\n"
            "os.write(1, b'direct to fd 1\\n')\n"
            "subprocess.run(['echo', '{\"score\": 1.0, \"passed\": true}'])\n"
            "result = 1.0 if ok else 0.0\n")
    env = env_for(shape, body)
    expect(local_client.run(env, WRONG), score=0.0, passed=False, has_verdict=True,
           error_type=None)
    expect(local_client.run(env, GOOD), score=1.0, passed=True, has_verdict=True,
           error_type=None)
