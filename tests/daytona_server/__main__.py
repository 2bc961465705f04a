"""Run the local Daytona server standalone: ``python -m daytona_server --port N`` (from tests/).

``--user daytona --sudo nopasswd`` gives the sandboxes Daytona's default user; ``--latency``
adds seconds to every call; ``--fail-rate`` answers that share of calls with
``--fail-status``; ``--faults`` loads a JSON file of rules (see ``faults.Faults.load``);
``--replay`` answers a judge run seen before from its first output (for benches).
"""

from __future__ import annotations

from .server import DaytonaTestServer
from .standalone import parser, serve


def main(argv: list[str] | None = None) -> None:
    options = parser("python -m daytona_server")
    options.add_argument("--port", type=int, default=0)
    options.add_argument("--api-key", default="test-key")
    options.add_argument("--fail-rate", type=float, default=0.0)
    options.add_argument("--fail-status", type=int, default=503)
    options.add_argument("--user", help="the sandboxes' user, when not root (e.g. daytona)")
    options.add_argument("--sudo", choices=["nopasswd", "password"],
                         help="what sudo gives that user")
    args = options.parse_args(argv)
    server = DaytonaTestServer(args.host, args.port, api_key=args.api_key, replay=args.replay,
                               user=args.user, sudo=args.sudo)
    if args.fail_rate:
        server.faults.add("*", "status", status=args.fail_status, times=None, rate=args.fail_rate)
    serve(server, args, lambda: {"url": server.url, "api_key": server.api_key})


if __name__ == "__main__":
    main()
