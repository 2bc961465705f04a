"""``examples/trl_grpo.py --tiny``, as a user runs it: a real GRPO run on the CPU that leaves
nothing behind in the temp folder (no directory, no mount) and shows a reward above 0 (its tiny
model is taught the reference answers first, so some sampled answers are right)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepgym_ray.sandboxes.local.workarea import mounts_under

pytestmark = pytest.mark.e2e

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[2]

RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
import trl_grpo
history = trl_grpo.main(["--tiny", "--mode", "local", "--rows", "16", "--steps", "3",
                         "--max-parallel", "4"])
print("OUT", json.dumps([h.get("reward") for h in history]))
"""


def test_tiny_grpo_example_shows_a_reward_and_leaves_nothing_behind(tmp_path, ray_temp_dir):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # Its own temp folder (watched below) and its own Ray (short socket paths under /tmp).
    env.update(TMPDIR=str(temp), RAY_TMPDIR=ray_temp_dir,
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", RUN, str(ROOT / "examples")], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rewards = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("OUT "))[4:])
    assert len(rewards) == 3 and max(rewards) > 0.0, rewards
    assert "step 3: reward" in proc.stderr and "no verdict" in proc.stderr, proc.stderr[-3000:]
    assert list(temp.glob("deepgym-grpo-*")) == []  # the run's folder was removed
    # Ray's end killed the actors, which had mounted their work areas there: their janitors
    # release them once they are gone (a bounded wait for that, not a timing).
    left = None
    for _ in range(300):
        left = mounts_under(temp) + [p.name for p in temp.glob("deepgym-*")]
        if not left:
            break
        time.sleep(0.1)
    assert not left, left
