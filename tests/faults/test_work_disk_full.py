"""The work disk is full (TMPDIR on a tiny tmpfs the test fills, where the runs' files go when
the provider has no tmpfs of its own for them): never a verdict."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from gated import GatedFactory
from held import ENV, HeldBatch, answers, check_contract, make_pool


@pytest.fixture
def full_disk():
    """A 256 KB tmpfs, filled to the last byte."""
    path = tempfile.mkdtemp(prefix="dgfull")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=1777", "tmpfs", path],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(path)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        # Unbuffered, so the ENOSPC comes from a write here and not again from close().
        with open(os.path.join(path, "filler"), "wb", buffering=0) as f:
            try:
                while f.write(b"\0" * 4096):
                    pass
            except OSError:
                pass
        yield path
    finally:
        subprocess.run(["umount", "-l", path], check=False)
        os.rmdir(path)


def test_full_work_disk_gives_no_verdict(ray_local, gate, pools, full_disk):
    name, handle = gate
    ray_local.get(handle.open.remote())  # nothing to hold: no run gets as far as the gate
    pool = make_pool(GatedFactory(name, tempdir=full_disk))
    pools.append(pool)
    held = HeldBatch(answers(8))
    run = pool.map(ENV, held.answers, max_parallel=4, on_result=lambda i, r: held.calls.append(i))
    held.results = list(run)
    check_contract(held, right_must_pass=False)
    # The machine could not run anything: no answer was judged, right or wrong.
    assert all(not r.has_verdict and r.reward is None for r in held.results), \
        [(r.error_type, r.details) for r in held.results]
