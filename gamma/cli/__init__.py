"""The ``gamma`` command line: a click group whose commands live in sibling modules.

Exit statuses: 0 success, 1 a check failed (tampered, different, violations),
2 input or usage error, 3 store busy. Results go to stdout; errors and the
one structured log line per command go to stderr (none for --help, --version
or under --quiet; GAMMA_LOG_LEVEL sets the least level written).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import sys
import time
from typing import Any

import click

from gamma.cli.logs import OFF, configure, emit, level_from_env
from gamma.core.errors import GammaError, InputError, IntegrityError, StoreBusyError
from gamma.core.version import __version__

__all__ = ["cli", "main"]

# command name -> module (under gamma.cli) and attribute; imported on first use
COMMANDS: dict[str, tuple[str, str]] = {
    "resolve": ("resolve", "resolve_command"),
    "init": ("store", "init_command"),
    "append": ("store", "append_command"),
    "export": ("store", "export_command"),
    "log": ("store", "log_command"),
    "verify": ("store", "verify_command"),
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
@click.option("--quiet", "-q", is_flag=True, help="Write no log line to stderr.")
@click.pass_context
def cli(ctx: click.Context, quiet: bool) -> None:
    """gamma: decide what an LLM agent may rely on, S = Γ(H, A, t).

    Every fact the actor may not rely on is listed with machine-readable
    reasons and the events behind them.
    """
    if quiet and isinstance(ctx.obj, dict):
        ctx.obj[_QUIET] = True
    if "structlog" in sys.modules:  # the command's module logs as it runs (review, mcp)
        _configure_logging()


#: The level main read, until structlog is configured: when a command that logs as it runs
#: was imported, or when main writes the command's line (--version, --help and --quiet runs
#: of the other commands never import structlog).
_PENDING_LEVEL: list[int] = []


def _configure_logging() -> None:
    if _PENDING_LEVEL:
        configure(level=_PENDING_LEVEL.pop())


_QUIET = "_quiet"  # a key of main's record that is not a log field


def main(argv: list[str] | None = None) -> None:
    """Console entry point: maps gamma's errors to messages and exit statuses, logs one line."""
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
    quiet = record.pop(_QUIET, False) or level == OFF
    if quiet or ("command" not in record and status == 0):
        sys.exit(status)  # --quiet; or --help / --version, which run no command
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
    except click.ClickException as exc:
        record["error"] = type(exc).__name__
        exc.show()
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
