"""Audit records replayed by tenant: the pure per-tenant job.

A record is replayed over its tenant's events among the first ``events`` of the log, under
the policy it was made under (or the one the caller insists on), with the whole log's chain
and tree heads (computed once, in the partitioning pass), as
``gamma.audit.replay.replay`` would over the whole log.
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

from gamma.audit.diff import diff_records
from gamma.audit.replay import ReplayResult, record_digest
from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.events import parse_actor
from gamma.core.resolving.resolver import resolve_partition
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.model import Event
from gamma.core.terms.policy import Policy
from gamma.core.terms.version import __version__

__all__ = ["RecordTask", "ReplayPartition", "RecordOutcome", "replay_tenant"]


@attrs.frozen(kw_only=True)
class RecordTask:
    """One record, with the whole log's heads after its ``events`` and after its heard prefix."""

    name: str
    record: dict[str, Any]
    policy: Policy
    head: str
    tree: TreeHead
    heard: int
    heard_head: str
    heard_tree: TreeHead


@attrs.frozen(kw_only=True)
class ReplayPartition:
    """One tenant's events (with their 1-based log positions), its records, the log's length."""

    tenant: str
    events: tuple[Event, ...]
    positions: tuple[int, ...]
    available: int
    records: tuple[RecordTask, ...]


@attrs.frozen(kw_only=True)
class RecordOutcome:
    """One record's replay: identical or not, and what an auditor reads."""

    name: str
    tenant: str
    ok: bool
    text: str
    result: dict[str, Any]


def replay_tenant(part: ReplayPartition) -> tuple[RecordOutcome, ...]:
    """Replay each of the tenant's records over its partition (records sorted by name)."""
    out = []
    for task in part.records:
        record = task.record
        count = int(record["events"])
        cut = bisect.bisect_right(part.positions, count)
        actor = parse_actor(record["actor"], policy=task.policy, source=task.name)
        at = parse_ts(record["at"])
        resolution = resolve_partition(part.events[:cut], actor, at, task.policy,
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
