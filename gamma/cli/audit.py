"""``gamma replay`` and ``gamma audit diff``: reproduce an audit record, compare two.

Replay exits 0 when the log reproduces the record (or differs only by values erased since,
SPEC §21), 1 when it does not (a
field-level diff says where; replaying under a ``--policy`` that is not the
record's is such a difference), 2 on input errors and when the record's policy
is none of the store's and the named policies and no ``--policy`` is given.
The choice of policy is :func:`gamma.audit.replay.record_policy`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from gamma.audit.replay import diff_records, read_audit, record_policy, replay
from gamma.cli import exit_with
from gamma.cli.logs import command
from gamma.cli.options import STDIN, Command, log_argument, read_log, read_policy
from gamma.core.terms.errors import PolicyError
from gamma.core.terms.policy import Policy
from gamma.storage.sources import LoadedLog, open_log
from gamma.storage.store import is_store

__all__ = ["audit_group", "replay_one_command"]



def _json_option(what: str) -> Callable[[Command], Command]:
    help = f"Print {what} as one canonical JSON line."
    return click.option("--json", "as_json", is_flag=True, help=help)


@click.command("replay")
@log_argument
@click.option(
    "--expect",
    "expect",
    required=True,
    metavar="AUDIT.json",
    type=click.Path(dir_okay=False),
    help="The audit record to reproduce (written by gamma resolve --audit).",
)
@click.option(
    "--policy",
    "policy_path",
    default=None,
    metavar="NAME|FILE",
    help="Replay under this policy (a named one or a TOML file); when it is not the record's,"
    " the replay is different and says so. Default: the record's own policy, found among"
    " the store's and the named policies.",
)
@_json_option("the result")
def replay_one_command(log: str, expect: str, policy_path: str | None, as_json: bool) -> None:
    """Replay LOG as an audit record saw it; exit 0 identical, 1 different or tampered.

    A difference that only values erased since explain (SPEC §21) is reported as such and
    exits 0: an erasure is not a changed decision.

    Recomputes the resolution over exactly the log events the record covers
    (its first `events`; events appended since do not matter), checks their
    chain head against the record's log, and compares every field.
    """
    with command("replay", log=log, expect=expect) as fields:
        record = read_audit(expect)
        explicit = read_policy(policy_path) if policy_path else None
        loaded: LoadedLog | None = None
        candidates: list[tuple[str, Policy]] = []
        if log != STDIN and is_store(log):
            loaded = open_log(log)
            if loaded.store_policy is not None:
                candidates.append(("the store's policy", loaded.store_policy))
        try:
            policy = explicit or record_policy(record, candidates, source=expect)
        except PolicyError as exc:
            raise PolicyError(f"{exc.message}, as --policy FILE", source=exc.source,
                              field=exc.field) from None
        if log == STDIN:
            events = read_log(log, policy)[0]
        elif loaded is None or loaded.store_policy != policy:
            events = open_log(log, policy=policy).events
        else:
            events = loaded.events
        result = replay(events, record, policy=policy, source=expect)
        click.echo(result.to_json() if as_json else result.render(), nl=as_json)
        fields.update(
            events=result.events,
            available=result.available,
            head=result.head,
            identical=result.ok,
            erased_only=result.erased_only,
            facts_changed=len(result.diff.facts),
        )
    if not (result.ok or result.erased_only):
        exit_with(1)


@click.group("audit")
def audit_group() -> None:
    """Work with audit records (written by gamma resolve --audit)."""


@audit_group.command("diff")
@click.argument("a", metavar="A.json", type=click.Path(dir_okay=False))
@click.argument("b", metavar="B.json", type=click.Path(dir_okay=False))
@_json_option("the differences")
def diff_command(a: str, b: str, as_json: bool) -> None:
    """Explain how audit record B differs from A; exit 0 same, 1 different.

    Names the facts newly admitted or excluded, changed codes and reasons,
    changed experience verdicts and ignored entries, and changed log, policy,
    actor or time.
    """
    with command("audit diff", a=a, b=b) as fields:
        diff = diff_records(read_audit(a), read_audit(b))
        if as_json:
            click.echo(diff.to_json())
        else:
            click.echo(f"A: {a}\nB: {b}\n" + diff.render(), nl=False)
        fields.update(same=diff.same, facts_changed=len(diff.facts))
    if not diff.same:
        exit_with(1)
