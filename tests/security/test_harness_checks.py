"""The battery's own checks are not vacuous: they see what an attack would leave behind."""

from __future__ import annotations

import os
import signal
import tempfile

import pytest
from harness import CLAIM, TAGS, Attack, render
from providers_under_test import PROVIDERS, SANDBOX_UID_BASE


def test_leftover_process_and_directory_are_seen_and_cleaned():
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as a sandbox uid")
    uid = SANDBOX_UID_BASE + 4242
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a stand-in survivor: a process of a sandbox uid
        os.setgid(uid)
        os.setuid(uid)
        os.write(ready_w, b"1")
        signal.pause()
        os._exit(0)
    os.read(ready_r, 1)
    left = tempfile.mkdtemp(prefix="deepgym-security-check-")
    case = next(c for c in PROVIDERS if c.mode == "local")
    entries = [{"uid": uid, "dirs": [left]}]
    try:
        problems = case.leftovers(entries)
        assert any(f"sandbox uid {uid}" in p for p in problems), problems
        assert any(left in p for p in problems), problems
        case.clean_up(entries)
        os.waitpid(pid, 0)  # the cleanup killed it
        assert case.leftovers(entries) == []
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def test_attacks_are_declared_with_known_tags_and_no_secret():
    with pytest.raises(ValueError, match="tags"):
        Attack(name="x", tags=("nonsense",), tries="", solution="")
    with pytest.raises(ValueError, match="secret"):
        Attack(name="x", tags=("time",), tries="", solution="'@SECRET@'")
    assert "time" in TAGS and render("@CLAIM@") == CLAIM
