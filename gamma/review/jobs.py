"""One streaming partitioning pass, and the per-tenant job: a pure function of its partition."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs

from gamma.audit.diff import diff_records
from gamma.core.canonical import compact_json, format_ts
from gamma.core.events import canonical_event
from gamma.core.heads import Heads
from gamma.core.merkle import TreeHead
from gamma.core.model import Actor, Event
from gamma.core.parsed import tenant_part
from gamma.core.policy import Policy
from gamma.core.resolver import resolve_partition

__all__ = ["Partition", "TenantResult", "partition", "review_tenant"]


@attrs.frozen(kw_only=True)
class Partition:
    """One tenant's events up to ``at``, its actors, and the whole log's heads at ``at``/``since``.

    Everything a worker needs; nothing else of the log crosses processes.
    """

    tenant: str
    events: tuple[Event, ...]
    actors: tuple[Actor, ...]
    at: datetime
    head: str
    tree: TreeHead
    policy: Policy
    since: datetime | None = None
    since_head: str | None = None
    since_tree: TreeHead | None = None


@attrs.frozen(kw_only=True)
class TenantResult:
    """A tenant's review: its JSONL text (one line per actor, by id) and its summary."""

    tenant: str
    events: int
    lines: str
    summary: dict[str, Any]


def partition(
    events: Iterable[Event],
    actors: Sequence[Actor],
    at: datetime,
    policy: Policy,
    *,
    since: datetime | None = None,
) -> tuple[Partition, ...]:
    """Split the log by tenant in one pass, with the whole log's heads at ``at`` and ``since``.

    Only tenants that have an actor get a partition (an actor without events
    gets an empty one); partitions come sorted by tenant.
    """
    wanted = {actor.tenant for actor in actors}
    by_tenant: dict[str, list[Event]] = {tenant: [] for tenant in wanted}
    heads = Heads()
    since_heads = (heads.log, heads.tree)
    for event in events:
        if event.ts > at:
            break  # ts never decreases along a log
        heads.add(canonical_event(event))
        if since is not None and event.ts <= since:
            since_heads = (heads.log, heads.tree)
        if event.tenant in by_tenant:
            by_tenant[event.tenant].append(event)
    return tuple(
        Partition(
            tenant=tenant,
            events=tenant_part(events, by_tenant[tenant]),
            actors=tuple(sorted((a for a in actors if a.tenant == tenant), key=lambda a: a.id)),
            at=at,
            head=heads.log,
            tree=heads.tree,
            policy=policy,
            since=since,
            since_head=None if since is None else since_heads[0],
            since_tree=None if since is None else since_heads[1],
        )
        for tenant in sorted(wanted)
    )


def review_tenant(part: Partition) -> TenantResult:
    """Every actor's resolution at ``at`` (and its changes since ``since``), and the summary."""
    lines: list[str] = []
    admitted: dict[str, list[str]] = {}
    withheld: dict[str, dict[str, list[str]]] = {}
    for actor in part.actors:
        now = resolve_partition(part.events, actor, part.at, part.policy, head=part.head,
                                tree=part.tree)
        line: dict[str, Any] = {"actor": actor.id, "digest": now.digest, "resolution": now.to_dict()}
        if part.since is not None:
            then = resolve_partition(part.events, actor, part.since, part.policy,
                                     head=part.since_head, tree=part.since_tree)
            line["since"] = diff_records(then.to_dict(), now.to_dict()).to_dict()
        lines.append(compact_json(line))
        for a in now.admitted:
            admitted.setdefault(a.fact, []).append(actor.id)
        for x in now.excluded:
            withheld.setdefault(x.fact, {})[actor.id] = list(x.codes)
    everyone = len(part.actors)
    restricted = {
        fact: {"admitted": admitted.get(fact, []), "withheld": withheld.get(fact, {})}
        for fact in sorted(set(admitted) | set(withheld))
        if len(admitted.get(fact, [])) < everyone
    }
    summary = {
        "actors": everyone,
        "events": len(part.events),
        "at": format_ts(part.at),
        "restricted": restricted,
    }
    return TenantResult(
        tenant=part.tenant,
        events=len(part.events),
        lines="".join(line + "\n" for line in lines),
        summary=summary,
    )
