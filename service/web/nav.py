"""The dashboard's navigation: the one list of top-level pages.

A new page (e.g. Vision for hf_vision): a route in its own module under service/web/ whose router install() includes,
a template extending base.html that passes ``active=<key>``, and one NavItem here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NavItem:
    key: str  # templates mark the current page with it (``active`` in the page's context)
    label: str
    path: str


NAV: tuple[NavItem, ...] = (
    NavItem("home", "Summary", "/"),
    NavItem("trends", "Trends", "/trends"),
    NavItem("compare", "Compare", "/compare"),
    NavItem("runs", "Runs", "/runs"),
    NavItem("vision", "Vision", "/vision"),
    NavItem("backends", "Backends", "/backends"),
    NavItem("training", "Training", "/training"),
    NavItem("releases", "Releases", "/releases"),
    NavItem("api", "API", "/docs"),  # the JSON API's operations (service/api/docs.py); /redoc reads the same
)
