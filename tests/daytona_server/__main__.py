"""Run the local Daytona server standalone: ``python -m daytona_server --port N`` (from tests/).

``--user daytona --sudo nopasswd`` gives the sandboxes Daytona's default user; ``--latency``
adds seconds to every call; ``--fail-rate`` answers that share of calls with
``--fail-status``; ``--faults`` loads a JSON file of rules (see ``faults.Faults.load``).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from .server import DaytonaTestServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m daytona_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default="test-key")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--fail-status", type=int, default=503)
    parser.add_argument("--faults", help="a JSON file of fault rules")
    parser.add_argument("--user", help="the sandboxes' user, when not root (e.g. daytona)")
    parser.add_argument("--sudo", choices=["nopasswd", "password"],
                        help="what sudo gives that user")
    parser.add_argument("--replay", action="store_true",
                        help="answer a judge run seen before from its first real run (benches)")
    args = parser.parse_args(argv)
    server = DaytonaTestServer(args.host, args.port, api_key=args.api_key, replay=args.replay,
                               user=args.user, sudo=args.sudo)
    if args.latency:
        server.faults.set_latency(args.latency)
    if args.fail_rate:
        server.faults.add("*", "status", status=args.fail_status, times=None, rate=args.fail_rate)
    if args.faults:
        with open(args.faults, encoding="utf-8") as f:
            server.faults.load(json.load(f))
    server.start()
    print(json.dumps({"url": server.url, "api_key": server.api_key}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
