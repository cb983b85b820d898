"""Torch version strings as runs record them ("2.6.0", "2.6.0+cu124", "2.7.0.dev20250101+cpu"): order and kind.

Ordered by PEP 440 (packaging.version), so 2.14.1 sorts after 2.9.0 and a nightly before the release it leads to. A
**release** is a version without a dev or pre-release part; the local part (``+cu124``, ``+cpu``) only names the
wheel's build (PyTorch's CUDA release wheels carry one) and does not make a version a nightly. Strings that are not
PEP 440 versions are kept, sorted before every version, and never count as releases.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from packaging.version import InvalidVersion, Version


@lru_cache(maxsize=8192)  # a pure function of the text; pages parse every version of years of nightlies
def parse(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def is_release(text: str) -> bool:
    version = parse(text)
    return version is not None and not version.is_devrelease and not version.is_prerelease


def sort_key(text: str) -> tuple[int, Version, str]:
    version = parse(text)
    return (0, Version("0"), text) if version is None else (1, version, text)


def ordered(versions: Iterable[str]) -> list[str]:
    """Distinct versions, oldest first."""
    return list(_ordered(frozenset(versions)))


@lru_cache(maxsize=64)  # the same set every request until a new version is ingested; Version.__lt__ is Python
def _ordered(versions: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(versions, key=sort_key))
