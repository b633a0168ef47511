"""structlog set-up for the CLI: one structured line per command, on stderr.

Configured only at the entry point (never by the library): JSON lines when
stderr is not a terminal, a readable console line when it is. ``GAMMA_LOG_LEVEL``
(debug, info, warning, error, off) sets the least level written; ``--quiet``
writes none; ``--help`` and ``--version`` run no command and log nothing. A command's
body adds counts and digests to its record; the entry point writes the one
line when the command ends, with its exit status, so failures and usage
errors are logged like successes.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

__all__ = ["LEVEL_ENV", "LEVELS", "OFF", "configure", "command", "emit", "level_from_env", "OUTCOMES"]

LEVEL_ENV = "GAMMA_LOG_LEVEL"
OFF = logging.CRITICAL + 10
LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": OFF,
}

# exit status -> (outcome, level)
OUTCOMES: dict[int, tuple[str, str]] = {
    0: ("ok", "info"),
    1: ("check_failed", "warning"),
    2: ("input_error", "error"),
    3: ("busy", "error"),
}


def level_from_env() -> int:
    """The level ``GAMMA_LOG_LEVEL`` asks for (info when unset); a bad value is a usage error."""
    text = os.environ.get(LEVEL_ENV, "info").strip().lower() or "info"
    if text not in LEVELS:
        raise click.UsageError(f"{LEVEL_ENV}={text!r}: expected one of {', '.join(LEVELS)}")
    return LEVELS[text]


def configure(*, json_lines: bool | None = None, level: int = logging.INFO) -> None:
    """Route structlog to stderr at ``level``; JSON unless stderr is a terminal."""
    import structlog  # lazy: it pulls in asyncio and rich, which --version and --help never need

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
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def emit(record: dict[str, Any], *, status: int, duration_ms: float) -> None:
    """Write the one line of a finished command."""
    outcome, level = OUTCOMES.get(status, ("failed", "error"))
    import structlog

    fields = {k: v for k, v in record.items() if k != "command"}
    log = structlog.get_logger("gamma")
    getattr(log, level)(
        "command",
        command=record.get("command", "gamma"),
        status=status,
        outcome=outcome,
        duration_ms=round(duration_ms, 3),
        **fields,
    )


@contextmanager
def command(name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """The record of the running command; the body adds counts and digests to it.

    Under ``gamma.cli.main`` the record is the click context's ``obj`` and
    main writes the line. Elsewhere (a test invoking a command directly) the
    line is written here when the body ends.
    """
    ctx = click.get_current_context(silent=True)
    shared = ctx.obj if ctx is not None and isinstance(ctx.obj, dict) else None
    record: dict[str, Any] = shared if shared is not None else {}
    record.update(fields, command=name)
    if shared is not None:
        yield record
        return
    started = time.perf_counter()
    status = 0
    try:
        yield record
    except click.exceptions.Exit as exc:
        status = exc.exit_code
        raise
    except BaseException:
        status = 2
        raise
    finally:
        emit(record, status=status, duration_ms=(time.perf_counter() - started) * 1000)
