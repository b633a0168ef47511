"""``gamma explain`` (why one fact is admitted or excluded, and what would change it) and
``gamma report`` (the self-contained HTML audit report)."""

from __future__ import annotations

import click

from gamma.audit.explain import explain
from gamma.audit.report import report_pieces
from gamma.cli import warn
from gamma.cli.logs import command
from gamma.cli.options import (
    actor_option,
    at_option,
    log_argument,
    output_path,
    policy_option,
    read_actor,
    read_at,
    read_policy,
    unknown_names,
    write_lines,
)
from gamma.core.terms.errors import InputError
from gamma.storage.sources import events_and_policy

__all__ = ["explain_command", "report_command"]

_AUDITOR = click.option(
    "--auditor", is_flag=True, help="Auditor's view: show withheld values and every event."
)


@click.command("explain")
@log_argument
@click.argument("fact", metavar="FACT")
@actor_option
@at_option
@policy_option
@_AUDITOR
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def explain_command(
    log: str, fact: str, actor: str, at: str, policy_path: str | None, auditor: bool, fmt: str
) -> None:
    """Explain FACT's decision for an actor at a time: timeline, dependencies, what would change it."""
    with command("explain", log=log, fact=fact, auditor=auditor) as record:
        at_ts = read_at(at)
        events, policy = events_and_policy(log, read_policy(policy_path) if policy_path else None)
        who = read_actor(actor, policy)
        if unknown_names(events, facts=[fact]):  # nothing to explain: not an empty timeline
            raise InputError(f"no fact {fact!r} in the log", source="FACT")
        for problem in unknown_names(events, tenant=who.tenant, actors=[who.id]):
            warn(problem)
        result = explain(events, fact, who, at_ts, policy=policy, auditor=auditor)
        click.echo(result.to_json() if fmt == "json" else result.render(), nl=fmt == "json")
        record.update(decision=result.decision, codes=list(result.codes))


@click.command("report")
@log_argument
@actor_option
@at_option
@policy_option
@_AUDITOR
@click.option("--compare", "compare", metavar="T2", default=None, help="Add the audit diff to time T2.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
def report_command(
    log: str, actor: str, at: str, policy_path: str | None, auditor: bool, compare: str | None, out: str
) -> None:
    """Write one self-contained HTML audit report of LOG for an actor at a time."""
    with command("report", log=log, out=out, auditor=auditor) as record:
        at_ts = read_at(at)
        compare_ts = read_at(compare, flag="--compare") if compare is not None else None
        output_path(out, flag="--out")  # before the work: the page would have nowhere to go
        events, policy = events_and_policy(log, read_policy(policy_path) if policy_path else None)
        who = read_actor(actor, policy)
        for problem in unknown_names(events, tenant=who.tenant, actors=[who.id]):
            warn(problem)
        lines = report_pieces(events, who, at_ts, policy=policy, auditor=auditor,
                              compare=compare_ts)
        record.update(bytes=write_lines(out, lines, flag="--out"))
