"""Diffs against the SWE-style fixture repository (tests/fixtures/swe), for the tests and the
security battery's attacks on patch tasks."""

from __future__ import annotations

import difflib
from pathlib import Path

SWE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swe"
SWE_REPO = SWE_FIXTURES / "image" / "repo"  # /testbed in the image, at the base commit
# A pytest hook that reports every test as passed: what a patch tries to load into the tests.
FORCE_PASSES = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                "    outcome.get_result().outcome = 'passed'\n")


def new_file(path: str, text: str) -> str:
    """A git diff that creates ``path`` holding ``text``."""
    lines = text.splitlines(True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}" for line in lines))


def edit(path: str, old: str, new: str) -> str:
    """A git diff that replaces ``old`` with ``new`` in the fixture repository's ``path``."""
    before = (SWE_REPO / path).read_text()
    assert old in before, old
    after = before.replace(old, new, 1)
    body = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def rename(old: str, new: str) -> str:
    """A git diff that renames ``old`` to ``new``, its content unchanged."""
    return (f"diff --git a/{old} b/{new}\nsimilarity index 100%\nrename from {old}\n"
            f"rename to {new}\n")
