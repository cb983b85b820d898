"""Torch version order and kind (service.queries.torch_versions), on the strings runs record."""

from __future__ import annotations

from service.queries.torch_versions import is_release, ordered


def test_versions_sort_by_pep440_not_by_text() -> None:
    mixed = ["2.14.1", "2.9.0", "2.7.0.dev20250101+cpu", "2.6.0", "2.7.0", "2.10.0rc1", "garbage", "2.7.0.dev20241231"]
    assert ordered(mixed) == ["garbage", "2.6.0", "2.7.0.dev20241231", "2.7.0.dev20250101+cpu", "2.7.0", "2.9.0",
                              "2.10.0rc1", "2.14.1"]


def test_release_is_a_version_without_dev_or_pre_release_part() -> None:
    assert is_release("2.6.0") and is_release("2.14.1") and is_release("2.6.0+cu124")
    assert not is_release("2.7.0.dev20250101+cpu")
    assert not is_release("2.10.0rc1")
    assert not is_release("garbage")
