"""The per-tenant review: a pure function of one tenant's parsed partition."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from gamma.audit.diff import diff_records
from gamma.core.integrity.merkle import TreeHead
from gamma.core.resolving.resolver import resolve_partition
from gamma.core.terms.canonical import compact_json, format_ts
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import Policy

__all__ = ["Partition", "TenantResult", "review_tenant"]


@attrs.frozen(kw_only=True)
class Partition:
    """One tenant's parsed events up to ``at``, its actors, and the whole log's heads at
    ``at``/``since``: what the pure job needs (a worker builds it from its shipped partition)."""

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
