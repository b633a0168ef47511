"""structlog set-up for the CLI: one structured line per command, on stderr.

Configured only at the entry point (never by the library): JSON lines when
stderr is not a terminal, a readable console line when it is.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

__all__ = ["configure", "command"]


def configure(*, json_lines: bool | None = None) -> None:
    """Route structlog to stderr; JSON unless stderr is a terminal."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


@contextmanager
def command(name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Log one line for a command when it ends, with its fields, outcome and duration.

    The body adds counts and digests to the yielded dict.
    """
    log = structlog.get_logger("gamma")
    started = time.perf_counter()
    extra: dict[str, Any] = dict(fields)
    outcome = "ok"
    try:
        yield extra
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        ms = round((time.perf_counter() - started) * 1000, 3)
        log.info("command", command=name, outcome=outcome, duration_ms=ms, **extra)
