"""Run the local Modal server standalone: ``python -m modal_server`` (from tests/).

Prints one JSON line (the provider's options: ``token_id``, ``token_secret``, ``server_url``)
once it serves; ``--latency`` adds seconds to every call; ``--faults`` loads a JSON file of
rules; ``--replay`` answers a judge run seen before from its first output (for benches). Stops
on SIGTERM or SIGINT, its sandboxes with it.
"""

from __future__ import annotations

from daytona_server.standalone import parser, serve

from .server import ModalTestServer


def main(argv: list[str] | None = None) -> None:
    args = parser("python -m modal_server").parse_args(argv)
    server = ModalTestServer(host=args.host, replay=args.replay)
    serve(server, args, server.provider_options)


if __name__ == "__main__":
    main()
