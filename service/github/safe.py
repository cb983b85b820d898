"""Text from data, made safe for GitHub markdown: it reads the same, and cannot mention, link, reference or format.

Model names (200 free characters), hosts, CPU and GPU names, versions, statuses, commands and summaries all come
from uploads. In an issue, a comment or a title, ``@someone`` pings a person or a team, ``#1234`` and ``GH-12`` link
an issue, ``https://...`` and ``www.`` autolink, ``[x](url)`` and ``![](url)`` link and load, HTML (``<details>``,
``<!--``) restructures the page, and a newline starts a heading or a list.

- :func:`inline`: for running text and table cells. Newlines and other controls become spaces, every ASCII character
  markdown gives a meaning to is backslash-escaped (CommonMark renders ``\\x`` as ``x``), and a word joiner (U+2060,
  invisible) goes after ``@``, before the digits of ``#123`` / ``GH-123`` and inside ``://`` and ``www.``, which
  GitHub's mention and autolink filters (run on the rendered text) would otherwise still see.
- :func:`title`: the same for an issue title, which GitHub shows as plain text (no backslashes there).
- :func:`code_block`: a fenced block whose fence is longer than any backtick run inside, so nothing breaks out.
"""

from __future__ import annotations

import re

WORD_JOINER = "\u2060"

# C0/C1 controls and Unicode line and paragraph separators: one line, always
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# What CommonMark or GFM may read as markup in running text: emphasis, code, links and images, HTML and entities,
# table pipes, strikethrough, mentions. An underscore inside a word (timm_models) is no emphasis in GFM and stays
# as it is; what only means something at the start of a line (- + 1. > ---) cannot be there, as nothing here starts
# a line; ( ) ! and > mean something only after ] or before [ or <, which are escaped.
_MARKUP = re.compile(r"([\\`*\[\]<#|~&@]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_BREAKS = (
    (re.compile(r"@"), "@" + WORD_JOINER),  # @user, @org/team, user@host (email autolink)
    (re.compile(r"#(?=\s*\d)"), "#" + WORD_JOINER),  # #123, owner/repo#123
    (re.compile(r"(?i)\bgh(?=\\?-)"), lambda m: m.group(0) + WORD_JOINER),  # GH-123
    (re.compile(r"(?i)(?<=[a-z])(?=://)"), WORD_JOINER),  # scheme://
    (re.compile(r"(?i)\bwww(?=\\?\.)"), lambda m: m.group(0) + WORD_JOINER),  # www.
)


def _one_line(text: object) -> str:
    return re.sub(" {2,}", " ", _CONTROLS.sub(" ", str(text))).strip()


def _break_references(text: str) -> str:
    for pattern, replacement in _BREAKS:
        text = pattern.sub(replacement, text)
    return text


def inline(text: object) -> str:
    """Markdown for ``text`` as literal text on one line (table cells included: ``|`` is escaped)."""
    return _break_references(_MARKUP.sub(r"\\\1", _one_line(text)))


def title(text: object, limit: int = 256) -> str:
    """An issue title (GitHub renders titles as plain text, but still links ``#123`` and mentions in some views)."""
    return _break_references(_one_line(text))[:limit]


def code_block(text: object, info: str = "") -> str:
    """A fenced code block holding ``text`` verbatim (GitHub neither mentions nor links inside one)."""
    body = _CONTROLS.sub(lambda m: "\n" if m.group(0) in ("\n", "\r\n") else " ", str(text).replace("\r\n", "\n"))
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"
