"""The ``deepgym-ray`` command."""

from __future__ import annotations

import argparse
import sys

from deepgym_ray import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deepgym-ray",
        description="Score model outputs in sandboxes, in parallel on a Ray cluster.",
    )
    parser.add_argument("--version", action="version", version=f"deepgym-ray {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
