"""perfdash's one logging setup, for every process: the service (its startup), the console script (``main()``), the
runner's worker processes and the service's detection workers.

Every line has a timestamp (UTC, RFC 3339), the level, the logger's name and the message, and, inside a request of
the service, the request's id (``REQUEST_ID``, set by service.request_log). ``json`` writes one JSON object a line
(what a log collector reads; the service's default); ``text`` the same fields for a person at a terminal (the console
script's default). ``PERFDASH_LOG_FORMAT`` and ``PERFDASH_LOG_LEVEL`` choose; the service reads them with its
settings (service.settings.Settings), processes without the service's settings (the runner, the upload client, the
bisect tool) with :meth:`LogOptions.from_environ`.

Standard library only: the runner-only install runs this too.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TextIO, get_args

FORMAT_ENV = "PERFDASH_LOG_FORMAT"
LEVEL_ENV = "PERFDASH_LOG_LEVEL"
LogFormat = Literal["json", "text"]
FORMATS: tuple[str, ...] = get_args(LogFormat)

# The id of the request being served (None outside one). A context variable, not a global: each request's task (and
# the threads and processes it hands work to, which copy it) sees its own.
REQUEST_ID: ContextVar[str | None] = ContextVar("perfdash_request_id", default=None)

# Libraries whose INFO lines are noise at INFO (all of them show at DEBUG): httpx logs every request's full URL, query
# included, which perfdash's own lines say better; alembic names its dialect on every command that opens the database.
QUIET_LOGGERS = {"httpx": logging.WARNING, "httpcore": logging.WARNING, "alembic": logging.WARNING}

# What every LogRecord has: the rest of a record's attributes are the ``extra=`` fields of the call, which JSON keeps
# (but uvicorn's ``color_message``, its message again with terminal colour codes).
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime",
                                                                                     "request_id", "color_message"}


@dataclass(frozen=True, slots=True)
class LogOptions:
    format: LogFormat = "text"
    level: str = "INFO"

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"{FORMAT_ENV}: {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.level.upper() not in logging.getLevelNamesMapping():
            raise ValueError(f"{LEVEL_ENV}: {self.level!r} is not a level (DEBUG, INFO, WARNING, ERROR)")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, default_format: LogFormat = "text") -> LogOptions:
        """The options of ``environ`` (default: this process's), ``default_format`` where it names none."""
        environ = os.environ if environ is None else environ
        return cls(format=environ.get(FORMAT_ENV) or default_format,  # type: ignore[arg-type]
                   level=environ.get(LEVEL_ENV) or "INFO")


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: timestamp, level, logger, message, request_id (in a request), the call's ``extra``
    fields, and the traceback of an exception as ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {"timestamp": _timestamp(record), "level": record.levelname, "logger": record.name,
                                   "message": record.getMessage()}
        if getattr(record, "request_id", None):
            line["request_id"] = record.request_id  # type: ignore[attr-defined]
        line.update({k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS and not k.startswith("_")})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``2026-11-28T01:43:23.123Z INFO service.detection.detector [request id] message``."""

    def format(self, record: logging.LogRecord) -> str:
        request = getattr(record, "request_id", None)
        text = f"{_timestamp(record)} {record.levelname} {record.name}{f' [{request}]' if request else ''} " \
               f"{record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class PerfdashHandler(logging.StreamHandler):
    """The root logger's handler that :func:`configure` installs; it stamps each record with the request id and
    remembers its options (which a child process is handed). Without a stream of its own it writes to whatever
    ``sys.stderr`` is when a line is written (as logging's last-resort handler does), so a replaced stderr (a test's
    capture, a worker's log file) gets the lines."""

    def __init__(self, options: LogOptions, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._own_stream = stream
        self.options = options
        self.setFormatter(JsonFormatter() if options.format == "json" else TextFormatter())

    @property
    def stream(self) -> TextIO:
        return self._own_stream if self._own_stream is not None else sys.stderr

    @stream.setter
    def stream(self, value: TextIO | None) -> None:  # StreamHandler.__init__ and setStream assign it
        self._own_stream = value

    def emit(self, record: logging.LogRecord) -> None:
        record.request_id = REQUEST_ID.get()
        super().emit(record)


def configure(options: LogOptions, stream: TextIO | None = None) -> None:
    """Send every logger's lines at ``options.level`` and above to ``stream`` (default: stderr) as ``options.format``
    says, and Python's warnings with them. Replaces the handler an earlier call installed (the last call wins);
    leaves other handlers of the root logger (a test's capture) alone."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, PerfdashHandler)]:
        root.removeHandler(handler)
        handler.close()
    root.addHandler(PerfdashHandler(options, stream))
    root.setLevel(options.level.upper())
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(root.level if root.level <= logging.DEBUG else max(level, root.level))
    logging.captureWarnings(True)


def installed() -> LogOptions | None:
    """The options of the handler :func:`configure` installed in this process, if any."""
    return next((h.options for h in logging.getLogger().handlers if isinstance(h, PerfdashHandler)), None)


def for_child() -> tuple[LogOptions | None, str | None]:
    """What a child process needs to log as this one does: ``initargs`` of :func:`configure_child`."""
    return installed(), REQUEST_ID.get()


def configure_child(options: LogOptions | None, request_id: str | None) -> None:
    """A pool's ``initializer`` (service.detection.night): this process's setup and request id, handed down."""
    if options is not None:
        configure(options)
    if request_id is not None:
        REQUEST_ID.set(request_id)
