"""``gamma init``, ``append``, ``export``, ``log`` and ``verify``: the store's commands.

Errors are raised as gamma errors and mapped to exit statuses by ``gamma.cli``
(input 2, tampered 1, busy 3); a failed verification prints its report first
and then leaves with status 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import click

from gamma.cli import exit_with, warn
from gamma.cli.chainkey import key_option, read_key
from gamma.cli.logs import command
from gamma.cli.options import (
    NO_TENANT,
    STDIN,
    STDIN_SOURCE,
    Command,
    read_log,
    read_policy,
    read_stdin,
    unknown_names,
)
from gamma.core.reading.events import decode_lines, event_line
from gamma.core.reading.reader import read_bounded
from gamma.core.terms.canonical import canonical_json, parse_ts
from gamma.core.terms.errors import InputError
from gamma.storage.committing import migrate_to_committed
from gamma.storage.migrations import LATEST
from gamma.storage.sources import verify_path
from gamma.storage.store import Store, is_store
from gamma.storage.verify import check_head, verify_bytes

__all__ = [
    "append_command",
    "export_command",
    "init_command",
    "key_option",
    "log_command",
    "migrate_command",
    "read_key",
    "verify_command",
]



def store_argument(func: Command) -> Command:
    return click.argument("store", metavar="STORE", type=click.Path(dir_okay=False))(func)


def _read_ts(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_ts(text)
    except ValueError as exc:
        raise InputError(str(exc), source=option) from None


def _write_lines(lines: Iterable[str]) -> int:
    """Write lines as UTF-8 whatever the locale, so output bytes equal the stored bytes."""
    count = 0
    with click.open_file("-", "wb") as out:
        for line in lines:
            out.write(line.encode("utf-8") + b"\n")
            count += 1
        out.flush()
    return count


@click.command("init")
@store_argument
@click.option(
    "--policy",
    "policy_path",
    default=None,
    metavar="NAME|FILE",
    help="The policy the store records and validates appends with: a named policy or a TOML"
    " file (default: the built-in default).",
)
@key_option
@click.option("--commit-values", "commit_values", is_flag=True,
              help="Chain each value's salted commitment, not the value, so values can be"
              " erased (gamma erase) with every proof left valid.")
def init_command(store: str, policy_path: str | None, key_file: str | None,
                 commit_values: bool) -> None:
    """Create an empty store.

    STORE must be a new or empty file. The store records its policy (--policy,
    else the default), whether it keeps a keyed chain (a key is given) and, with
    --commit-values, that it commits to values (each assert gets a random salt;
    the chain and the tree hash the commitment, the value is kept beside them).
    """
    with command("init", store=store) as record:
        policy = read_policy(policy_path)
        key = read_key(key_file)
        with Store.init(store, policy=policy, key=key, commit_values=commit_values) as created:
            result = {"head": created.head(), "keyed": created.keyed, "policy": policy.digest}
            if commit_values:
                result["values"] = "committed"
        click.echo(canonical_json(result))
        record.update(keyed=key is not None, policy=policy.digest, committed=commit_values)


@click.command("append")
@store_argument
@click.argument("file", metavar="FILE|-", type=click.Path(dir_okay=False, allow_dash=True))
@key_option
def append_command(store: str, file: str, key_file: str | None) -> None:
    """Append a JSONL batch to a store, all or none.

    FILE is a JSONL file, or - for stdin. Events may omit ts (the store stamps
    them); events already stored are skipped. Prints {"appended", "events",
    "head"}. Exits 2 on any input error (nothing stored), 3 when another
    writer holds the lock past the busy timeout.
    """
    with command("append", store=store, file=file) as record:
        key = read_key(key_file)
        source = "<stdin>" if file == "-" else file
        try:
            with click.open_file(file, "rb") as stream:
                raw = read_bounded(stream, source=source)  # no line held past the limit
        except OSError as exc:
            raise InputError(f"cannot read events: {exc.strerror}", source=source) from None
        lines = decode_lines(raw, source=source)
        with Store.open(store, key=key) as opened:
            result = opened.append(lines, source=source)
        click.echo(canonical_json(result.to_dict()))
        record.update(appended=result.appended, events=result.events, head=result.head)


@click.command("migrate")
@store_argument
@click.option("--expect-policy", "expect_policy", default=None, metavar="DIGEST",
              help="The recorded policy you vouch for (needed to seal a keyed store).")
@click.option("--commit-values", "commit_values", is_flag=True,
              help="Write STORE's log to a new store (--to) that commits to values.")
@click.option("--to", "to", default=None, metavar="NEW", type=click.Path(dir_okay=False),
              help="The new store --commit-values writes (a new or empty file).")
@click.option("--actor", default="gamma", show_default=True,
              help="The writer of the closing migrate event (--commit-values).")
@click.option("--tenant", default="gamma", show_default=True,
              help="The tenant of the closing migrate event (--commit-values).")
@key_option
def migrate_command(store: str, expect_policy: str | None, commit_values: bool, to: str | None,
                    actor: str, tenant: str, key_file: str | None) -> None:
    """Bring a store to the latest schema, seal a keyed one with its key, or
    migrate its log to a store that commits to values.

    A keyed store from before schema 4 has no keyed seal over its metadata; no
    migration or append writes one. Give the key and --expect-policy (the digest
    you vouch for: a resolution's 'policy'); the store must verify with the key
    in all else. Prints {"keyed_seal", "policy", "schema_version"}.

    With --commit-values --to NEW: STORE (a plaintext store that verifies) is only
    read; NEW gets its policy, every event at its position with each assert under
    a fresh salt, then a migrate event naming STORE's head, tree size and root.
    Prints {"event", "events", "from_head", "from_root", "from_size", "head"}.
    """
    with command("migrate", store=store) as record:
        key = read_key(key_file)
        if commit_values or to is not None:
            if not commit_values or to is None:
                raise InputError("--commit-values and --to NEW go together: the log is written"
                                 " to a new store", source="--to")
            migrated = migrate_to_committed(store, to, key=key, actor=actor, tenant=tenant)
            click.echo(canonical_json(migrated.to_dict()))
            record.update(events=migrated.events, head=migrated.head,
                          from_head=migrated.from_head)
            return
        with Store.open(store, key=key) as opened:
            if opened.keyed:
                if expect_policy is None:
                    raise InputError("sealing a keyed store vouches for its policy: give"
                                     " --expect-policy", source="--expect-policy")
                opened.seal(expect_policy=expect_policy)
            result = {"keyed_seal": opened.keyed, "policy": opened.policy.digest,
                      "schema_version": LATEST}
        click.echo(canonical_json(result))
        record.update(**result)


@click.command("export")
@store_argument
def export_command(store: str) -> None:
    """Print a store's events as canonical JSONL.

    The way to move a log: the output verifies with the store's head.
    """
    with command("export", store=store) as record, Store.open(store, read_only=True) as opened:
        record.update(events=_write_lines(opened.export()), head=opened.head())


@click.command("log")
@click.argument("log", metavar="STORE|LOG", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--tenant", default=None, help="Only this tenant's events.")
@click.option("--since", default=None, metavar="TS", help="Only events with ts >= TS.")
@click.option("--until", default=None, metavar="TS", help="Only events with ts <= TS.")
def log_command(log: str, tenant: str | None, since: str | None, until: str | None) -> None:
    """Print a slice of a store or a JSONL log (- for stdin) as canonical JSONL.

    Filter by tenant and by ts (--since and --until are both inclusive).
    """
    with command("log", log=log, tenant=tenant, since=since, until=until) as record:
        since_ts, until_ts = _read_ts(since, "--since"), _read_ts(until, "--until")
        if since_ts is not None and until_ts is not None and since_ts > until_ts:
            raise InputError("--since is after --until: the range is empty", source="--since")
        if log != STDIN and is_store(log):
            with Store.open(log, read_only=True) as opened:
                lines = opened.slice(tenant=tenant, since=since_ts, until=until_ts)
                written = _write_lines(lines)
                record.update(events=written)
                if tenant is not None and not written and next(
                    iter(opened.slice(tenant=tenant)), None
                ) is None:
                    warn(NO_TENANT.format(tenant=tenant))
            return
        events, _ = read_log(log, None)
        for problem in unknown_names(events, tenant=tenant):
            warn(problem)
        chosen = (
            event_line(e)
            for e in events
            if (tenant is None or e.tenant == tenant)
            and (since_ts is None or e.ts >= since_ts)
            and (until_ts is None or e.ts <= until_ts)
        )
        record.update(events=_write_lines(chosen))


@click.command("verify")
@click.argument("log", metavar="STORE|LOG", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--expect-head", default=None, metavar="H", help="The head must equal H.")
@click.option(
    "--expect-prefix",
    default=None,
    metavar="H",
    help="H must be the head after some event (a log that has grown since).",
)
@click.option("--expect-checkpoint", "expect_checkpoint", default=None, metavar="FILE",
              type=click.Path(dir_okay=False),
              help="A kept signed checkpoint the log must extend (needs --pub-key).")
@click.option("--pub-key", "pub_key", default=None, metavar="FILE",
              type=click.Path(dir_okay=False), help="The checkpoint signer's verifier key.")
@click.option("--expect-policy", "expect_policy", default=None, metavar="DIGEST",
              help="A store's recorded policy must have this digest (a resolution's 'policy').")
@key_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify_command(
    log: str,
    expect_head: str | None,
    expect_prefix: str | None,
    expect_checkpoint: str | None,
    pub_key: str | None,
    expect_policy: str | None,
    key_file: str | None,
    as_json: bool,
) -> None:
    """Check the hash chain of a store or a JSONL log (- for JSONL on stdin).

    Prints the head and exits 0 when intact. Otherwise says what it found, on
    stderr: grown (1; --expect-prefix accepts it), wrong key (1), tampered at
    position N (edited, deleted, inserted or reordered) (1), truncated or
    rewritten (1), tampered at position N (tree, misnumbered, invalid: the tree
    rows, positions or the log's rules disagree with the events) (1), policy
    changed (1: the policy is not its digest, or not --expect-policy), metadata
    changed (1: store_meta or schema_version do not match their seal, or a key
    was given and the keyed seal is missing or wrong), not keyed (2: a key was
    given to a store without a keyed chain). Exits 2 when unreadable. Values
    erased by gamma erase are not tampering: the count and the erase events are
    said on stderr (and in --json); a value row changed, deleted without an erase,
    or an erasure no erase event backs is tampering at position N (value_changed,
    value_deleted, erasure_forged) (1).
    Without a key, a rewrite that recomputed the chain is caught only by
    --expect-head / --expect-prefix, and one that recomputed the policy's seal
    only by --expect-policy. A store is opened read-only: no byte of it or of
    its WAL changes.
    """
    with command("verify", log=log) as record:
        key = read_key(key_file)
        head = check_head(expect_head, field="expect_head")
        prefix = check_head(expect_prefix, field="expect_prefix")
        if log == STDIN:
            report = verify_bytes(read_stdin("LOG"), source=STDIN_SOURCE, key=key,
                                  expect_head=head, expect_prefix=prefix)
        else:
            report = verify_path(log, key=key, expect_head=head, expect_prefix=prefix,
                                 expect_policy=expect_policy)
        record.update(ok=report.ok, events=report.events, head=report.head, kind=report.kind,
                      verdict=report.verdict)
        if as_json:
            click.echo(canonical_json(report.to_dict()))
        elif report.ok:
            click.echo(report.head)
        else:
            click.echo(f"{report.verdict}: {report.detail}", err=True)
        if report.note and not as_json:
            click.echo(f"note: {report.note}", err=True)
        if report.erase_events and not as_json:  # erased, not tampered (SPEC §9.11)
            click.echo(f"erased: {report.erased} values, by the erase events"
                       f" {', '.join(report.erase_events)}", err=True)
        checked = True
        if expect_checkpoint is not None:
            from gamma.cli.proofs import check_checkpoint  # loads cryptography only when asked

            checked = check_checkpoint(log, expect_checkpoint, pub_key, as_json=as_json)
            record.update(checkpoint_ok=checked)
        elif pub_key is not None:
            raise InputError("--pub-key checks a checkpoint: give --expect-checkpoint too",
                             source="--pub-key")
    if not report.ok:
        exit_with(report.status)
    if not checked:
        exit_with(1)
