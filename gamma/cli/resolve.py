"""``gamma resolve``: Γ over a log file or store, printed as text, JSON or a context block."""

from __future__ import annotations

import click

from gamma.cli import warn
from gamma.cli.logs import command
from gamma.cli.options import (
    actor_option,
    at_option,
    log_argument,
    one_stdin,
    output_path,
    policy_option,
    read_actor,
    read_at,
    read_log,
    read_policy,
    unknown_names,
)
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.collector import collector_paused


@click.command("resolve")
@log_argument
@actor_option
@at_option
@policy_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "context"]),
    default="text",
    show_default=True,
    help="text: a readable report; json: the canonical record; context: the prompt block.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="With --format context: only the facts of this key (repeatable).",
)
@click.option(
    "--audit",
    "audit_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the audit record (resolution + engine + event count) to this file.",
)
def resolve_command(
    log: str,
    actor: str,
    at: str,
    policy_path: str | None,
    fmt: str,
    keys: tuple[str, ...],
    audit_path: str | None,
) -> None:
    """Resolve LOG for an actor at a time: what may the actor rely on, and why not the rest."""
    # the command owns its process, so it pauses the collector (the library never does): the
    # log's events, Γ's records and the output hold no cycles and live until the process ends
    with command("resolve", log=log, format=fmt) as record, collector_paused():
        one_stdin(("LOG", log), ("--actor", actor))
        at_ts = read_at(at)
        if audit_path is not None:
            output_path(audit_path, flag="--audit")
        events, policy = read_log(
            log, read_policy(policy_path) if policy_path else None, resolve_at=at_ts
        )
        who = read_actor(actor, policy)
        resolution = resolve(events, who, at_ts, policy)
        if audit_path is not None:
            from gamma.audit.replay import write_audit  # lazy: only --audit needs the audit layer

            write_audit(audit_path, resolution, events)
        if keys and fmt != "context":
            raise click.UsageError("--key applies to --format context only")
        for problem in unknown_names(events, tenant=who.tenant, actors=[who.id], keys=keys):
            warn(problem)
        count = len(events)
        del events  # the resolution holds what its output needs: the log's memory is free for it
        if fmt == "json":  # bytes, as encoded: a large record is not copied again as text
            click.echo(resolution.to_json_bytes())
        else:
            click.echo(resolution.render(fmt, keys=keys or None), nl=False)
        record.update(
            events=count,
            admitted=len(resolution.admitted),
            excluded=len(resolution.excluded),
            at=format_ts(at_ts),
            digest=resolution.digest,
            head=resolution.log,
        )
