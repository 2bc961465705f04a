"""The sandbox's CPU per remote run: what one judge run costs inside a Modal, E2B or Daytona
sandbox (the in-sandbox program, the runner, the verifier and the solution), and the client's
and the test server's beside it.

The provider runs in this process on threads against its local test server (also in this
process); a sandbox of the server is a container with a cpuacct cgroup of its own, read before
and after ``--runs`` runs of ``coin_change``'s reference, one at a time, in one warm sandbox.
To compare two trees side by side, run it with each on ``PYTHONPATH``, alternating:

    for tree in /tmp/before /work/main /tmp/before /work/main; do
        PYTHONPATH=$tree .venv/bin/python bench/remote_sandbox_cpu.py --provider modal
    done
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
os.environ.setdefault("MODAL_CONFIG_PATH", "/nonexistent/deepgym-bench/modal.toml")


def start_server(provider: str):
    if provider == "modal":
        from modal_server import ModalTestServer as Server
    elif provider == "e2b":
        from e2b_server import E2BTestServer as Server
    else:
        from daytona_server import DaytonaTestServer as Server
    return Server().start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", choices=("modal", "e2b", "daytona"), default="modal")
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    import deepgym_ray
    from deepgym_ray import DeepGym, load_environment

    env = load_environment("coin_change")
    server = start_server(args.provider)
    client = DeepGym(mode=args.provider, backend="threads", **server.provider_options())
    try:
        assert client.run(env, env.reference_solution).score == 1.0  # the sandbox, warm
        (box,) = list(server.boxes.values())
        usage = Path(box.container.groups["cpuacct"]) / "cpuacct.usage"
        inside0, own0, started = int(usage.read_text()), os.times(), time.monotonic()
        for _ in range(args.runs):
            assert client.run(env, env.reference_solution).score == 1.0
        inside, own = int(usage.read_text()) - inside0, os.times()
        wall = time.monotonic() - started
        print(json.dumps({
            "tree": str(Path(deepgym_ray.__file__).parents[1]), "provider": args.provider,
            "runs": args.runs,
            "sandbox_cpu_ms_per_run": round(inside / 1e6 / args.runs, 1),
            "client_and_server_cpu_ms_per_run": round(
                1000 * (own.user + own.system - own0.user - own0.system) / args.runs, 1),
            "wall_ms_per_run": round(1000 * wall / args.runs, 1)}), flush=True)
    finally:
        client.close()
        server.stop()


if __name__ == "__main__":
    main()
