"""The ``perfdash`` console script: one parser, subcommands registered by the part of perfdash that owns them.

Each module in COMMAND_MODULES exposes ``register(subparsers)`` and sets ``handler`` on its parsers. Registration
must stay cheap: handlers import torch, SQLAlchemy or FastAPI themselves, so ``perfdash --help`` and the service
never import torch.

Settings are read here, once: a subcommand that needs the service's settings says so with
``set_defaults(reads_settings=True)`` (or a predicate of its arguments, e.g. ``ingest`` only without ``--url``) and
finds them in ``args.settings``. A caller that already holds settings (``perfdash nightly`` running its steps) hands
them to ``main`` instead of steering the steps through the environment. This module names the other parts only as
strings (COMMAND_MODULES, SETTINGS_CLASS): the contract package imports none of them, and the runner-only install,
which has no service, never loads the settings class.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from perfdash import __version__, logs

COMMAND_MODULES: tuple[str, ...] = (
    "service.cli",
    "service.detection.cli",
    "service.nightly",
    "runner.cli",
    "runner.scale_cli",
    "perfbisect.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfdash",
        description="Nightly performance dashboard for torch.compile: benchmark, ingest, detect, report, bisect.",
    )
    parser.add_argument("--version", action="version", version=f"perfdash {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


SETTINGS_CLASS = ("service.settings", "Settings")
# For a command that reads the settings: the one line to print instead of a traceback when its database cannot be
# reached (None: not that; the exception goes on). Named as a string: the contract package imports no service code.
DATABASE_DOWN = ("service.db", "unavailable_message")


def _reads_settings(args: argparse.Namespace) -> bool:
    wants = getattr(args, "reads_settings", False)
    return bool(wants(args) if callable(wants) else wants)


def read_settings() -> Any:
    """The service's settings from the environment (pydantic-settings): the one place they are read."""
    module, name = SETTINGS_CLASS
    return getattr(importlib.import_module(module), name)()


def _settings_problem(exc: ValueError) -> str:
    """What is wrong, without the values (a token or a password may be one of them)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}"
                         for e in errors(include_input=False, include_url=False))
    return " ".join(str(exc).split())


def main(argv: Sequence[str] | None = None, *, settings: Any = None) -> int:
    """Parse ``argv`` and run the subcommand. ``settings``: the service's Settings when the caller already holds them
    (default: read from the environment, if the subcommand needs them)."""
    try:  # before anything logs: every subcommand's lines get a timestamp, a level and a logger (perfdash.logs)
        logs.configure(logs.LogOptions.from_environ())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if _reads_settings(args):
        try:
            args.settings = settings if settings is not None else read_settings()
        except ValueError as exc:  # pydantic's ValidationError and a secret file that cannot be read
            print(f"error: the settings in the environment are not valid: {_settings_problem(exc)}", file=sys.stderr)
            return 2
        try:
            return int(args.handler(args) or 0)
        except Exception as exc:
            module, name = DATABASE_DOWN
            message = getattr(importlib.import_module(module), name)(exc, args.settings)
            if message is None:
                raise
            print(f"error: perfdash {args.command}: {message}", file=sys.stderr)
            return 1
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
