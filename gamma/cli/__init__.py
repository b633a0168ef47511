"""The ``gamma`` command line: a click group whose commands live in sibling modules.

Exit statuses: 0 success, 1 a check failed (tampered, different, violations),
2 input or usage error, 3 store busy, 4 an internal error (a bug: one line, no traceback).
Results go to stdout; errors (one line starting ``Error:``) and warnings (``Warning:``) go to
stderr. The one structured log line per command is written only when asked for: ``-v``, or
``GAMMA_LOG_LEVEL`` set (it also sets the least level written); never under ``--quiet``.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import os
import sys
import time
from typing import Any

import click

from gamma.cli.logs import LEVEL_ENV, OFF, configure, emit, level_from_env
from gamma.core.terms.errors import GammaError, InputError, IntegrityError, StoreBusyError
from gamma.core.terms.version import __version__

__all__ = ["cli", "main", "exit_with", "quiet", "verbose", "warn", "INTERNAL"]

# command name -> module (under gamma.cli) and attribute; imported on first use
COMMANDS: dict[str, tuple[str, str]] = {
    "resolve": ("resolve", "resolve_command"),
    "init": ("store", "init_command"),
    "append": ("store", "append_command"),
    "export": ("store", "export_command"),
    "log": ("store", "log_command"),
    "verify": ("store", "verify_command"),
    "migrate": ("store", "migrate_command"),
    "erase": ("erase", "erase_command"),
    "replay": ("review", "replay_command"),  # --records by tenant, else audit's replay
    "audit": ("audit", "audit_group"),
    "validate": ("score", "validate_command"),
    "score": ("score", "score_command"),
    "conformance": ("conformance", "conformance_command"),
    "import": ("importer", "import_group"),
    "policies": ("policies", "policies_command"),
    "explain": ("explain", "explain_command"),
    "report": ("explain", "report_command"),
    "prove": ("proofs", "prove_group"),
    "verify-proof": ("proofs", "verify_proof_command"),
    "checkpoint": ("proofs", "checkpoint_command"),
    "verify-checkpoint": ("proofs", "verify_checkpoint_command"),
    "keygen": ("proofs", "keygen_command"),
    "review": ("review", "review_command"),
    "mcp": ("mcp", "mcp_command"),
    "serve": ("serve", "serve_command"),
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (keeps startup fast)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        present = [
            name
            for name, (module, _) in COMMANDS.items()
            if importlib.util.find_spec(f"{__name__}.{module}") is not None
        ]
        return sorted(present)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[name]
        if importlib.util.find_spec(f"{__name__}.{module_name}") is None:
            return None
        command: click.Command = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gamma")
@click.option("--quiet", "-q", is_flag=True, help="Write no log line and no progress to stderr.")
@click.option("--verbose", "-v", is_flag=True,
              help=f"Write the command's structured log line to stderr (as ${LEVEL_ENV} does).")
@click.pass_context
def cli(ctx: click.Context, quiet: bool, verbose: bool) -> None:
    """gamma: decide what an LLM agent may rely on, S = Γ(H, A, t).

    Every fact the actor may not rely on is listed with machine-readable
    reasons and the events behind them.
    """
    if quiet and verbose:
        raise click.UsageError("give --quiet or --verbose, not both")
    ctx.meta[_QUIET] = quiet
    ctx.meta[_VERBOSE] = not quiet and (verbose or _asked_by_env())
    if isinstance(ctx.obj, dict):
        ctx.obj[_QUIET], ctx.obj[_VERBOSE] = quiet, ctx.meta[_VERBOSE]
    if "structlog" in sys.modules:  # the command's module logs as it runs (review, mcp)
        _configure_logging(off=quiet)


def quiet() -> bool:
    """``--quiet`` was given: no progress, no log line."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_QUIET))


def verbose() -> bool:
    """The log was asked for (``-v`` or ``GAMMA_LOG_LEVEL``): a command may log as it runs."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx.meta.get(_VERBOSE)) if ctx is not None else _asked_by_env()


def warn(message: str) -> None:
    """One line on stderr about a result that is honest but likely not what was meant."""
    click.echo(f"Warning: {message}", err=True)


def _asked_by_env() -> bool:
    return os.environ.get(LEVEL_ENV, "").strip().lower() not in ("", "off")


#: The level main read, until structlog is configured: when a command that logs as it runs
#: was imported, or when main writes the command's line (--version, --help and --quiet runs
#: of the other commands never import structlog).
_PENDING_LEVEL: list[int] = []


def _configure_logging(*, off: bool = False) -> None:
    if _PENDING_LEVEL:
        configure(level=logging.CRITICAL if off else _PENDING_LEVEL.pop())  # nothing logs it


_QUIET = "_quiet"  # keys of main's record (and of the context's meta) that are not log fields
_VERBOSE = "_verbose"

#: The exit status of an exception gamma did not expect: a bug, reported in one line.
INTERNAL = 4


def main(argv: list[str] | None = None) -> None:
    """Console entry point: maps gamma's errors to one-line messages and exit statuses; logs
    the command's line when asked (-v, GAMMA_LOG_LEVEL)."""
    level = logging.INFO
    try:
        level = level_from_env()
    except click.UsageError as exc:
        exc.show()
        sys.exit(2)
    _PENDING_LEVEL[:] = [min(level, logging.CRITICAL)]
    # A command is one short process over many small acyclic objects: collecting
    # cycles every 700 allocations costs up to a third of a large resolve.
    gc.set_threshold(100_000, 50, 100)
    record: dict[str, Any] = {}
    started = time.perf_counter()
    status = _run(argv, record)
    asked = record.pop(_VERBOSE, None)
    asked = _asked_by_env() if asked is None else asked  # None: no command line was parsed
    if record.pop(_QUIET, False) or not asked or level == OFF:
        sys.exit(status)  # not asked for, or --quiet
    if "command" not in record and status == 0:
        sys.exit(status)  # --help / --version, which run no command
    if "command" not in record:  # a usage error before the command began
        words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
        record["command"] = words[0] if words else "gamma"
    _configure_logging()
    emit(record, status=status, duration_ms=(time.perf_counter() - started) * 1000)
    sys.exit(status)


def _run(argv: list[str] | None, record: dict[str, Any]) -> int:
    """Run the command line; return the exit status, having printed any error."""
    try:
        # without standalone mode, click returns the code of a raised Exit
        code = cli.main(args=argv, prog_name="gamma", standalone_mode=False, obj=record)
        return code if isinstance(code, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `gamma`: the help, as click shows it
        exc.show()
        return exc.exit_code
    except click.UsageError as exc:  # one line, as every error: the help is one flag away
        record["error"] = type(exc).__name__
        path = exc.ctx.command_path if exc.ctx is not None else "gamma"
        click.echo(f"Error: {_one_line(exc.format_message())} (see '{path} --help')", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        record["error"] = type(exc).__name__
        click.echo(f"Error: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except InputError as exc:
        record["error"] = type(exc).__name__
        click.echo(f"Error: {_as_flag(exc)}", err=True)
        return 2
    except IntegrityError as exc:
        record["error"] = type(exc).__name__
        click.echo(f"Error: {exc}", err=True)
        return 1
    except StoreBusyError as exc:
        record["error"] = type(exc).__name__
        click.echo(f"Error: {exc}", err=True)
        return 3
    except GammaError as exc:
        record["error"] = type(exc).__name__
        click.echo(f"Error: {exc}", err=True)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the backstop: a bug is one line, never a traceback
        record["error"] = type(exc).__name__
        click.echo(f"Error: internal error, please report it: {_crash_site(exc)}", err=True)
        return INTERNAL


def _crash_site(exc: BaseException) -> str:
    """The exception's type, message and innermost frame, on one line."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    place = ""
    if frame is not None:
        code = frame.tb_frame.f_code
        place = f" at {os.path.basename(code.co_filename)}:{frame.tb_lineno} in {code.co_name}"
    return f"{type(exc).__name__}{place}: {_one_line(str(exc))[:300]}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: Library parameters a command line sets by flag: an error naming one names the flag.
_FLAGS = {
    "reader": "--reader", "system": "--system", "timeout": "--timeout",
    "experience": "--experience", "expect_head": "--expect-head",
    "expect_prefix": "--expect-prefix", "expect_policy": "--expect-policy",
    "authority": "--writer-authority",
}  # fmt: skip


def _as_flag(exc: InputError) -> InputError:
    """The library names the parameter (``field="reader"``); the command line names its flag."""
    if exc.source is None and exc.line is None and exc.field in _FLAGS:
        return type(exc)(exc.message, source=_FLAGS[exc.field])
    return exc


def exit_with(code: int) -> Any:
    """Leave with ``code`` after the command's output (for checks that failed: 1)."""
    raise click.exceptions.Exit(code)
