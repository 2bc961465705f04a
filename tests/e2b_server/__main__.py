"""Run the local E2B server standalone: ``python -m e2b_server`` (from tests/).

Prints one JSON line (the provider's options: ``api_key``, ``api_url``, ``sandbox_url``) once
it serves; ``--latency`` adds seconds to every call (the control plane's and the daemon's);
``--faults`` loads a JSON file of rules; ``--replay`` answers a judge run seen before from its
first output (for benches). Stops on SIGTERM or SIGINT, its sandboxes with it.
"""

from __future__ import annotations

from daytona_server.standalone import parser, serve

from .server import E2BTestServer


def main(argv: list[str] | None = None) -> None:
    args = parser("python -m e2b_server").parse_args(argv)
    server = E2BTestServer(host=args.host, replay=args.replay)
    serve(server, args, server.provider_options)


if __name__ == "__main__":
    main()
