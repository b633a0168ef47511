"""The ``gamma`` command line: a click group whose commands live in sibling modules.

Exit statuses: 0 success, 1 a check failed (tampered, different, violations),
2 input or usage error, 3 store busy. Results go to stdout; errors and the
one structured log line per command go to stderr.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from .. import __version__
from ..errors import GammaError, InputError, IntegrityError, StoreBusyError
from ..logs import configure

__all__ = ["cli", "main"]

# command name -> module (under gamma.cli) and attribute; imported on first use
COMMANDS: dict[str, tuple[str, str]] = {
    "resolve": ("resolve", "resolve_command"),
    "init": ("store", "init_command"),
    "append": ("store", "append_command"),
    "export": ("store", "export_command"),
    "log": ("store", "log_command"),
    "verify": ("store", "verify_command"),
    "replay": ("audit", "replay_command"),
    "audit": ("audit", "audit_group"),
    "validate": ("score", "validate_command"),
    "score": ("score", "score_command"),
    "conformance": ("conformance", "conformance_command"),
    "import": ("importer", "import_group"),
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
def cli() -> None:
    """gamma: decide what an LLM agent may rely on, S = Γ(H, A, t).

    Every fact the actor may not rely on is listed with machine-readable
    reasons and the events behind them.
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point: maps gamma's errors to messages and exit statuses."""
    configure()
    try:
        # without standalone mode, click returns the code of a raised Exit
        code = cli.main(args=argv, prog_name="gamma", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except InputError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except IntegrityError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except StoreBusyError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(3)
    except GammaError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(0)


def exit_with(code: int) -> Any:
    """Leave with ``code`` after the command's output (for checks that failed: 1)."""
    raise click.exceptions.Exit(code)
