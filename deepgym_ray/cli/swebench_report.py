"""The report of a patch-task eval in the shape of SWE-bench's run report.

SWE-bench's harness ends a run with a JSON report of instance ids: resolved, unresolved, with
an empty patch, and with errors. ``deepgym-ray eval swebench_pro --report FILE.json`` writes
the same shape, so tools that read SWE-bench's reports read ours. An instance whose run had
no verdict (an outage, a failed image build) is an error, never unresolved; an instance with
several samples counts as resolved when every sample resolved it.

Example:
    >>> report = run_report([("a-1", "", None), ("a-2", "d", True), ("a-3", "d", False)])
    >>> report["resolved_ids"], report["empty_patch_ids"], report["unresolved_ids"]
    (['a-2'], ['a-1'], ['a-3'])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["run_report"]


def run_report(outcomes: Iterable[tuple[str, str, bool | None]]) -> dict[str, Any]:
    """``outcomes``: (instance id, the patch, resolved or None for no verdict) per run."""
    submitted: dict[str, None] = {}
    empty, errors, resolved, unresolved = set(), set(), set(), set()
    for instance, patch, outcome in outcomes:
        submitted.setdefault(instance, None)
        if not patch.strip():
            empty.add(instance)
        elif outcome is None:
            errors.add(instance)
        elif outcome:
            resolved.add(instance)
        else:
            unresolved.add(instance)
    resolved -= unresolved | errors | empty
    unresolved -= errors | empty
    completed = resolved | unresolved
    ids = list(submitted)

    def ordered(group: set[str]) -> list[str]:
        return [i for i in ids if i in group]

    return {
        "total_instances": len(ids), "submitted_instances": len(ids),
        "completed_instances": len(completed), "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved), "empty_patch_instances": len(empty),
        "error_instances": len(errors), "completed_ids": ordered(completed),
        "incomplete_ids": ordered(set(ids) - completed - empty),
        "empty_patch_ids": ordered(empty), "submitted_ids": ids,
        "resolved_ids": ordered(resolved), "unresolved_ids": ordered(unresolved),
        "error_ids": ordered(errors), "schema_version": 2,
    }
