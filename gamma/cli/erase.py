"""``gamma erase``: destroy committed values for good, leaving every proof of the log valid.

One library call (``Store.erase``, SPEC §21); errors map to exit statuses in ``gamma.cli``:
2 for a request that erases nothing (nothing changed), 3 when a reader held the scrub up
(the erase is committed; the next writer scrubs).
"""

from __future__ import annotations

import click

from gamma.cli.chainkey import key_option, read_key
from gamma.cli.logs import command
from gamma.cli.store import store_argument
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import InputError
from gamma.storage.store import Store

__all__ = ["erase_command"]


@click.command("erase")
@store_argument
@click.option("--tenant", required=True, help="The tenant whose values are erased.")
@click.option("--basis", required=True, metavar="TEXT",
              help="The legal basis of the erasure (e.g. 'GDPR Art. 17(1)(a)'), kept in the log.")
@click.option("--actor", required=True, metavar="WRITER",
              help="Who erases: a writer holding the policy's [erasure] authority.")
@click.option("--fact", "facts", multiple=True, metavar="ID",
              help="A fact whose value to erase (repeat for several).")
@click.option("--key", "fact_key", default=None, metavar="K",
              help="Erase every value of this key in the tenant.")
@click.option("--subject", default=None, metavar="S",
              help="Erase every value about this data subject (an assert's 'subject').")
@click.option("--all-of-tenant", "all_of_tenant", is_flag=True,
              help="Erase every value the tenant still holds.")
@click.option("--id", "event_id", default=None, metavar="ID",
              help="The erase event's id (default: derived from the store and the request).")
@key_option
def erase_command(
    store: str,
    tenant: str,
    basis: str,
    actor: str,
    facts: tuple[str, ...],
    fact_key: str | None,
    subject: str | None,
    all_of_tenant: bool,
    event_id: str | None,
    key_file: str | None,
) -> None:
    """Erase committed values of a tenant from STORE, by fact, key, subject or all.

    Give exactly one of --fact (repeatable), --key, --subject and --all-of-tenant.
    The erase is an event of the log naming each fact and its commitment, never a
    value; the values and their salts are deleted and scrubbed from the file, its
    -wal and -shm. Heads, the tree, checkpoints and proofs taken before stay valid.
    Only a store made with --commit-values erases. Prints {"erased", "event",
    "events", "head"}. Exits 2 when nothing is erased (a fact erased already, not
    the tenant's, no value left), nothing changed; 3 when a reader held the scrub up.
    """
    with command("erase", store=store, tenant=tenant) as record:
        chosen = [bool(facts), fact_key is not None, subject is not None, all_of_tenant]
        if sum(chosen) != 1:
            raise InputError("give exactly one of --fact, --key, --subject and --all-of-tenant",
                             source="--fact")
        key = read_key(key_file)
        with Store.open(store, key=key) as opened:
            result = opened.erase(
                tenant=tenant, basis=basis, actor=actor, facts=facts or None, key=fact_key,
                subject=subject, all_of_tenant=all_of_tenant, event_id=event_id,
            )
        click.echo(canonical_json(result.to_dict()))
        record.update(erased=len(result.erased), event=result.event, events=result.events,
                      head=result.head)
