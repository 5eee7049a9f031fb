"""Structured logging to stderr (or a file), never stdout.

structlog is imported on the first message that passes the level filter, so a quiet
agent (the default level is ``warning``) never pays for it on the way to ``initialize``.
Context such as ``session_id`` and ``request_id`` is bound with :func:`bound` and travels
with asyncio tasks (contextvars).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any, TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

_level = LEVELS["warning"]
_stream: TextIO = sys.stderr
_file: TextIO | None = None  # the log file configure() opened, if any
_logger: Any = None
_EMPTY: dict[str, Any] = {}  # never mutated: bound() always sets a new dict
_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar(
    "acp_log_ctx", default=_EMPTY
)


def configure(level: str = "warning", file: str | None = None) -> None:
    """Set the level and destination. ``file`` is appended to; default is stderr. A log
    file opened by an earlier call is closed."""
    global _level, _stream, _logger, _file
    _level = LEVELS[level]
    opened = open(file, "a", buffering=1, encoding="utf-8") if file else None  # noqa: SIM115
    if _file is not None:
        _file.close()
    _file = opened
    _stream = opened or sys.stderr
    _logger = None


def enabled(level: str) -> bool:
    return LEVELS[level] >= _level


def _get() -> Any:
    global _logger
    if _logger is None:
        # structlog, on the first log line only: off the way to `initialize`
        import structlog

        _logger = structlog.wrap_logger(
            structlog.PrintLogger(_stream),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    return _logger


def _emit(level: str, event: str, kw: dict[str, Any]) -> None:
    if LEVELS[level] < _level:
        return
    ctx = _context.get()
    getattr(_get(), level)(event, **({**ctx, **kw} if ctx else kw))


def debug(event: str, **kw: Any) -> None:
    _emit("debug", event, kw)


def info(event: str, **kw: Any) -> None:
    _emit("info", event, kw)


def warning(event: str, **kw: Any) -> None:
    _emit("warning", event, kw)


def error(event: str, **kw: Any) -> None:
    _emit("error", event, kw)


def exception(event: str, **kw: Any) -> None:
    """Log at error level with the current exception's traceback."""
    _emit("error", event, {**kw, "exc_info": True})


@contextlib.contextmanager
def bound(**kw: Any) -> Iterator[None]:
    token = _context.set({**_context.get(), **kw})
    try:
        yield
    finally:
        _context.reset(token)
