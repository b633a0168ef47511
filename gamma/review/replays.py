"""Audit records replayed by tenant: one streaming pass over the log, one pure job per tenant.

A record is replayed over its tenant's events among the first ``events`` of the log,
with the whole log's chain heads (computed once, in the partitioning pass), as
``gamma.audit.replay.replay`` would over the whole log.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gamma.audit.diff import diff_records
from gamma.audit.replay import ReplayResult, record_digest
from gamma.core.canonical import parse_ts
from gamma.core.events import canonical_event, parse_actor
from gamma.core.heads import Heads
from gamma.core.merkle import TreeHead
from gamma.core.model import Event
from gamma.core.parsed import tenant_part
from gamma.core.policy import Policy
from gamma.core.resolver import resolve_partition
from gamma.core.version import __version__

__all__ = ["RecordTask", "ReplayPartition", "RecordOutcome", "partition_records", "replay_tenant"]


@attrs.frozen(kw_only=True)
class RecordTask:
    """One record, with the whole log's heads after its ``events`` and after its heard prefix."""

    name: str
    record: dict[str, Any]
    head: str
    tree: TreeHead
    heard: int
    heard_head: str
    heard_tree: TreeHead


@attrs.frozen(kw_only=True)
class ReplayPartition:
    """One tenant's events (with their log positions), its records, and the log's length."""

    tenant: str
    events: tuple[Event, ...]
    positions: tuple[int, ...]
    available: int
    records: tuple[RecordTask, ...]
    policy: Policy


@attrs.frozen(kw_only=True)
class RecordOutcome:
    """One record's replay: identical or not, and what an auditor reads."""

    name: str
    tenant: str
    ok: bool
    text: str
    result: dict[str, Any]


def partition_records(
    events: Sequence[Event], records: Mapping[str, dict[str, Any]], policy: Policy
) -> tuple[ReplayPartition, ...]:
    """Group records by their actor's tenant and cut the log for them in one pass."""
    needed: dict[str, tuple[int, int]] = {}
    for name, record in records.items():
        count = min(int(record["events"]), len(events))
        at = parse_ts(record["at"])
        heard = min(count, bisect.bisect_right(events, at, key=lambda e: e.ts))
        needed[name] = (count, heard)
    positions_wanted = {p for pair in needed.values() for p in pair}
    tenants: dict[str, list[str]] = {}
    for name in sorted(records):
        tenants.setdefault(str(records[name]["actor"]["tenant"]), []).append(name)
    last = max((c for c, _ in needed.values()), default=0)
    running = Heads()
    heads = {0: (running.log, running.tree)} if 0 in positions_wanted else {}
    by_tenant: dict[str, tuple[list[Event], list[int]]] = {t: ([], []) for t in tenants}
    for position, event in enumerate(events[:last]):
        running.add(canonical_event(event))
        if position + 1 in positions_wanted:
            heads[position + 1] = (running.log, running.tree)
        if event.tenant in by_tenant:
            kept, where = by_tenant[event.tenant]
            kept.append(event)
            where.append(position)
    parts = []
    for tenant in sorted(tenants):
        kept, where = by_tenant[tenant]
        tasks = tuple(
            RecordTask(name=name, record=records[name],
                       head=heads[needed[name][0]][0], tree=heads[needed[name][0]][1],
                       heard=needed[name][1], heard_head=heads[needed[name][1]][0],
                       heard_tree=heads[needed[name][1]][1])
            for name in tenants[tenant]
        )  # fmt: skip
        parts.append(
            ReplayPartition(tenant=tenant, events=tenant_part(events, kept), positions=tuple(where),
                            available=len(events), records=tasks, policy=policy)
        )  # fmt: skip
    return tuple(parts)


def replay_tenant(part: ReplayPartition) -> tuple[RecordOutcome, ...]:
    """Replay each of the tenant's records over its partition (records sorted by name)."""
    out = []
    for task in part.records:
        record = task.record
        if record["policy"] != part.policy.digest:
            text = f"different: the record was made under policy {record['policy']}\n"
            out.append(RecordOutcome(name=task.name, tenant=part.tenant, ok=False, text=text,
                                     result={"ok": False, "policy": record["policy"]}))  # fmt: skip
            continue
        count = int(record["events"])
        cut = bisect.bisect_left(part.positions, count)
        actor = parse_actor(record["actor"], policy=part.policy, source=task.name)
        at = parse_ts(record["at"])
        resolution = resolve_partition(part.events[:cut], actor, at, part.policy,
                                       head=task.heard_head, tree=task.heard_tree)
        replayed = {**resolution.to_dict(), "engine": __version__, "events": task.heard}
        result = ReplayResult(
            events=count,
            available=part.available,
            head=task.head,
            record_head=record["log"],
            tree=task.tree,
            record_tree=TreeHead(size=record["tree"]["size"], root=record["tree"]["root"]),
            record_digest_ok=record_digest(record) == record["digest"],
            diff=diff_records(record, replayed),
            record_policy=record["policy"],
            resolution=resolution,
        )
        out.append(RecordOutcome(name=task.name, tenant=part.tenant, ok=result.ok,
                                 text=result.render(), result=result.to_dict()))  # fmt: skip
    return tuple(out)
