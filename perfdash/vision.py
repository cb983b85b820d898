"""The Hugging Face vision latency suite's publication rows, torch-free: the one list of its twelve models.

The runner benchmarks them (runner.suites.hf_vision builds each row from this file) and the Vision page shows them in
the publication's order with its labels and tasks (service.web.vision); both read the list here, so the service needs
nothing of the runner. A row name carries its batch size (``ViT_bs16``): the result contract holds one row per name and
a failure row carries batch size 0, so each batch size is a row of its own.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MODELS_FILE = Path(__file__).parent / "data" / "hf_vision.toml"
# The publication's batch sizes.
BATCH_SIZES: tuple[int, ...] = (1, 4, 16)
_ROW_NAME = re.compile(r"^(?P<model>.+)_bs(?P<batch>[1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class RowName:
    model: str
    batch_size: int


def row_name(model: str, batch_size: int) -> str:
    return f"{model}_bs{batch_size}"


def parse_row_name(name: str) -> RowName | None:
    """``ViT_bs16`` -> (ViT, 16); None for a name that does not carry a batch size."""
    match = _ROW_NAME.match(name)
    return RowName(match["model"], int(match["batch"])) if match else None


@dataclass(frozen=True, slots=True)
class PublicationRow:
    model: str  # the data file's name (row names are ``<model>_bs<N>``)
    label: str
    task: str
    position: int


@cache
def publication_rows() -> dict[str, PublicationRow]:
    """The rows in the publication's order (read once: the data file ships with the code; the runner validates the
    rest of each entry when it loads the list)."""
    entries = tomllib.loads(MODELS_FILE.read_text(encoding="utf-8"))["model"]
    rows = {}
    for position, entry in enumerate(entries):
        options = entry.get("options", {})
        rows[entry["name"]] = PublicationRow(model=entry["name"], label=str(options.get("label", entry["name"])),
                                             task=str(options.get("task", "")), position=position)
    return rows
