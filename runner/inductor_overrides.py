"""Inductor configuration overrides of a run (``perfdash run --inductor-config NAME=VALUE``): for experiments that
change one Inductor setting between two runs of the same torch and compare the code it generates.

The overrides travel as one worker environment entry, ``PERFDASH_INDUCTOR_CONFIG`` (``name=value`` pairs, sorted,
``;``-separated), so they are recorded in the manifest's ``config.env`` and are part of the configuration like every
other worker setting (perfdash/axes.py, axis ``env``). The worker sets them on ``torch._inductor.config`` before the
job (``apply``); a name Inductor does not have stops the worker with an error naming it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

ENV_NAME = "PERFDASH_INDUCTOR_CONFIG"
_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=([^;]*)$")


def encode(pairs: Iterable[str]) -> str:
    """The environment value of ``NAME=VALUE`` flags; ValueError names a malformed one."""
    checked = {}
    for pair in pairs:
        match = _PAIR.match(pair.strip())
        if match is None:
            raise ValueError(f"--inductor-config takes NAME=VALUE (e.g. cpp.simdlen=256), got {pair!r}")
        checked[match.group(1)] = match.group(2)
    return ";".join(f"{name}={value}" for name, value in sorted(checked.items()))


def _value(text: str) -> Any:
    """A Python literal (256, True, None, 'x') when it is one, else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse(value: str) -> dict[str, Any]:
    return {name: _value(v) for name, _, v in (pair.partition("=") for pair in value.split(";") if pair)}


def apply(environ: Mapping[str, str]) -> dict[str, Any]:
    """Set the run's overrides on Inductor's configuration (imports torch); returns what it set."""
    overrides = parse(environ.get(ENV_NAME, ""))
    if overrides:
        from torch._inductor import config

        unknown = [name for name in overrides if name not in config.get_config_copy()]
        if unknown:
            raise ValueError(f"--inductor-config: Inductor has no setting {', '.join(unknown)}")
        for name, value in overrides.items():
            *parents, leaf = name.split(".")
            target: Any = config
            for part in parents:  # cpp.simdlen: the ``cpp`` section of the config module
                target = getattr(target, part)
            setattr(target, leaf, value)
    return overrides
