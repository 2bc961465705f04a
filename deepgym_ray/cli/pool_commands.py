"""``deepgym-ray pool status`` and ``deepgym-ray pool shutdown``: the operator's view of pools.

Example:
    $ deepgym-ray pool status
    POOL      PROVIDER  ACTORS  NODES  IN FLIGHT   RUNS  NO VERDICT  RESTARTS
    deepgym   local     2/2     1      0            328  0           0
    $ deepgym-ray pool shutdown deepgym
    stopped 2 actors of pool 'deepgym'
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from deepgym_ray.cli.errors import BadInput

__all__ = ["add_parser", "cmd_pool"]


def add_parser(commands: Any) -> None:
    """Add the ``pool`` command (with ``status`` and ``shutdown``) to the CLI's subparsers."""
    pool = commands.add_parser("pool", help="see or stop the verifier pools of the cluster")
    actions = pool.add_subparsers(dest="pool_action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="every pool: actors per node, runs, no-verdicts")
    status.add_argument("--namespace", help="only pools in this Ray namespace")
    status.add_argument("--json", action="store_true", help="print JSON")
    stop = actions.add_parser("shutdown", help="kill a pool's actors (every pool without NAME)")
    stop.add_argument("name", nargs="?", metavar="NAME", help="the pool's name (--pool-name)")
    stop.add_argument("--namespace", help="only pools in this Ray namespace")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


def cmd_pool(args: argparse.Namespace) -> int:
    from deepgym_ray.pool.admin import pool_status, shutdown_pools

    if args.pool_action == "shutdown":
        if args.name is not None:  # a name that is not running is a mistake worth an exit code
            running = sorted({p.name for p in pool_status(args.namespace)})
            if args.name not in running:
                raise BadInput(f"no pool named {args.name!r} is running"
                               + (f" (running: {', '.join(running)})" if running else ""))
        stopped = shutdown_pools(args.name, args.namespace)
        if not stopped:
            print("no verifier pool is running; nothing to stop")
            return 0
        what = f"pool {args.name!r}" if args.name else "every pool"
        print(f"stopped {stopped} actor{'s' if stopped != 1 else ''} of {what}")
        return 0
    pools = pool_status(args.namespace)
    if args.json:
        print(json.dumps([p.as_dict() for p in pools], indent=2))
        return 0
    if not pools:
        print("no verifier pool is running in this cluster")
        return 0
    rows = [["POOL", "NAMESPACE", "PROVIDER", "ACTORS", "NODES", "IN FLIGHT", "RUNS",
             "NO VERDICT", "RESTARTS"]]
    for p in pools:
        rows.append([p.name, p.namespace, p.provider, f"{p.alive}/{p.actors}",
                     " ".join(f"{node}:{n}" for node, n in sorted(p.nodes.items())) or "-",
                     str(p.in_flight), str(p.runs), str(p.no_verdict), str(p.restarts)])
    print(_table(rows))
    return 0
