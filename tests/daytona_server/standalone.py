"""What the local servers' command lines share (``python -m daytona_server``, ``e2b_server``,
``modal_server``): their common options, and serving until SIGTERM or SIGINT.

Example:
    args = parser(prog).parse_args()
    serve(server, args, lambda: {"url": server.url})
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Callable
from typing import Any


def parser(prog: str) -> argparse.ArgumentParser:
    """A command line with the options every local server takes."""
    made = argparse.ArgumentParser(prog=prog)
    made.add_argument("--host", default="127.0.0.1")
    made.add_argument("--latency", type=float, default=0.0,
                      help="seconds added to every call")
    made.add_argument("--faults", help="a JSON file of fault rules (see faults.Faults.load)")
    made.add_argument("--replay", action="store_true",
                      help="answer a judge run seen before from its first real run (benches)")
    return made


def serve(server: Any, args: argparse.Namespace, said: Callable[[], dict]) -> None:
    """Apply ``args``' latency and faults, start ``server``, print ``said()`` as one JSON line,
    and serve until SIGTERM or SIGINT; then stop it (its sandboxes with it)."""
    if args.latency:
        server.faults.set_latency(args.latency)
    if args.faults:
        with open(args.faults, encoding="utf-8") as f:
            server.faults.load(json.load(f))
    stop = threading.Event()  # before the line is out: whoever read it may stop us at once
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print(json.dumps(said()), flush=True)
    stop.wait()
    server.stop()
