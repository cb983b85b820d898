"""The ``perfdash`` console script: one parser, subcommands registered by the part of perfdash that owns them.

Each module in COMMAND_MODULES exposes ``register(subparsers)`` and sets ``handler`` on its parsers. Registration
must stay cheap: handlers import torch, SQLAlchemy or FastAPI themselves, so ``perfdash --help`` and the service
never import torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "service.cli",
    "service.detection.cli",
    "perfdash.nightly",
    "runner.cli",
    "runner.scale_cli",
    "perfbisect.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfdash",
        description="Nightly performance dashboard for torch.compile: benchmark, ingest, detect, report, bisect.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
