"""Run the local Modal server standalone: ``python -m modal_server`` (from tests/).

Prints one JSON line (the provider's options: ``token_id``, ``token_secret``, ``server_url``)
once it serves; ``--latency`` adds seconds to every call; ``--faults`` loads a JSON file of
rules (see ``daytona_server.faults.Faults.load``). Stops on SIGTERM or SIGINT, its sandboxes
with it.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from .server import ModalTestServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m modal_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--faults", help="a JSON file of fault rules")
    args = parser.parse_args(argv)
    server = ModalTestServer(host=args.host)
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
