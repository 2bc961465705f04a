"""Run the local E2B server standalone: ``python -m e2b_server`` (from tests/).

Prints one JSON line (``api_key``, ``api_url``, ``sandbox_url``) once it serves; ``--latency``
adds seconds to every call (the control plane's and the daemon's); ``--faults`` loads a JSON
file of rules (see ``daytona_server.faults.Faults.load``). Stops on SIGTERM or SIGINT, its
sandboxes with it.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from .server import E2BTestServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m e2b_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--faults", help="a JSON file of fault rules")
    args = parser.parse_args(argv)
    server = E2BTestServer(host=args.host)
    if args.latency:
        server.faults.set_latency(args.latency)
    if args.faults:
        with open(args.faults, encoding="utf-8") as f:
            server.faults.load(json.load(f))
    server.start()
    print(json.dumps(server.provider_options()), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
