"""What crosses processes, and the worker's side of it.

A task carries one tenant's spooled partition (a path on this machine, or its bytes
for a worker elsewhere), the actors or records to resolve, and the whole log's heads.
The worker parses and validates only its partition, runs the pure job
(``gamma.review.jobs`` / ``replays``) and, when it shares the output directory,
writes its tenant's file under a temporary name that the run renames when done.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.events import check_names
from gamma.core.reading.reader import read_numbered
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import Policy
from gamma.review.jobs import Partition, review_tenant
from gamma.review.replays import RecordOutcome, RecordTask, ReplayPartition, replay_tenant
from gamma.review.spool import tenant_file

__all__ = [
    "Shipment", "ReviewTask", "ReviewDone", "ReplayTask", "CheckTask", "load", "review_job",
    "replay_job", "run_job", "write_temp", "temp_prefix",
]  # fmt: skip


@attrs.frozen(kw_only=True)
class Shipment:
    """One tenant's spooled events (``POSITION LINE CANONICAL`` lines): chunks of a spool
    file on this machine, or their bytes."""

    tenant: str
    events: int
    path: str | None = None
    chunks: tuple[tuple[int, int], ...] = ()
    data: bytes | None = None
    source: str | None = None

    def read(self) -> bytes:
        if self.data is not None or self.path is None:
            return self.data or b""
        parts = []
        with open(self.path, "rb") as handle:
            for offset, length in self.chunks:
                handle.seek(offset)
                parts.append(handle.read(length))
        return b"".join(parts)

    def loaded(self) -> Shipment:
        """The same shipment carrying its bytes, for a worker that cannot read this disk."""
        return attrs.evolve(self, data=self.read(), path=None, chunks=())


def load(ship: Shipment, policy: Policy) -> tuple[tuple[Event, ...], tuple[int, ...]]:
    """Parse and validate the partition: its events and their 1-based log positions.

    Errors name the log and the line the event had there.
    """
    numbered: list[tuple[int, str]] = []
    positions: list[int] = []
    for raw in ship.read().decode("utf-8").split("\n"):
        if not raw:
            continue
        position, line, body = raw.split(" ", 2)
        numbered.append((int(line), body))
        positions.append(int(position))
    # one tenant's events of a valid log are a valid log (references never cross tenants)
    return read_numbered(numbered, policy=policy, source=ship.source), tuple(positions)


def temp_prefix(name: str, token: str) -> str:
    """The start of a run's temporary names for ``name``: hidden, and never ``*.jsonl``."""
    return f".{name}.{token}."


def write_temp(directory: Path, name: str, text: str, token: str, *, sync: bool = True) -> Path:
    """Write ``text`` to a fresh temporary name for ``name`` in ``directory`` (synced, unless
    it is only read back by this run)."""
    temp = directory / f"{temp_prefix(name, token)}{secrets.token_hex(4)}.tmp"
    with open(temp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    return temp


@attrs.frozen(kw_only=True)
class ReviewTask:
    """A tenant's review: its partition, its actors (by id), ``at`` and ``since`` with heads."""

    ship: Shipment
    actors: tuple[Actor, ...]
    at: datetime
    head: str
    tree: TreeHead
    policy: Policy
    since: datetime | None = None
    since_head: str | None = None
    since_tree: TreeHead | None = None
    out: str | None = None
    token: str = ""

    @property
    def tenant(self) -> str:
        return self.ship.tenant

    def remote(self) -> ReviewTask:
        """For a worker on another machine: the partition as bytes, the result sent back."""
        return attrs.evolve(self, ship=self.ship.loaded(), out=None)


@attrs.frozen(kw_only=True)
class ReviewDone:
    """A tenant reviewed: its file and its summary's canonical text, each as a temporary file
    to rename or read (a worker sharing the output directory) or as text (one elsewhere)."""

    tenant: str
    events: int
    actors: int
    temp: str | None
    lines: str | None
    summary_temp: str | None
    summary: str | None


def review_job(task: ReviewTask) -> ReviewDone:
    """Parse the partition, review every actor, write (or return) the tenant's JSONL and the
    canonical text of its summary."""
    events, _ = load(task.ship, task.policy)
    result = review_tenant(Partition(
        tenant=task.tenant, events=events, actors=task.actors, at=task.at, head=task.head,
        tree=task.tree, policy=task.policy, since=task.since, since_head=task.since_head,
        since_tree=task.since_tree,
    ))  # fmt: skip
    summary = compact_json(result.summary)
    if task.out is None:
        return ReviewDone(tenant=task.tenant, events=len(events), actors=len(task.actors),
                          temp=None, lines=result.lines, summary_temp=None, summary=summary)  # fmt: skip
    name = tenant_file(task.tenant)
    folder = Path(task.out)
    return ReviewDone(
        tenant=task.tenant, events=len(events), actors=len(task.actors),
        temp=str(write_temp(folder, name, result.lines, task.token)), lines=None,
        summary_temp=str(write_temp(folder, name + ".summary", summary, task.token, sync=False)),
        summary=None,
    )


@attrs.frozen(kw_only=True)
class ReplayTask:
    """A tenant's records to replay, each under its own policy, over its partition."""

    ship: Shipment
    available: int
    records: tuple[RecordTask, ...]

    @property
    def tenant(self) -> str:
        return self.ship.tenant

    def remote(self) -> ReplayTask:
        return attrs.evolve(self, ship=self.ship.loaded())


def replay_job(task: ReplayTask) -> tuple[RecordOutcome, ...]:
    """Parse the partition once (checked against every policy its records name), replay each."""
    policies = sorted({r.policy.digest: r.policy for r in task.records}.items())
    events, positions = load(task.ship, policies[0][1])
    for _, policy in policies[1:]:
        check_names(events, policy, source=task.ship.source)
    return replay_tenant(ReplayPartition(tenant=task.tenant, events=events, positions=positions,
                                         available=task.available, records=task.records))  # fmt: skip


@attrs.frozen(kw_only=True)
class CheckTask:
    """A tenant no job resolves (no actor to review, no record to replay): its partition is
    still parsed and held to every rule of SPEC §2, as ``gamma resolve`` holds the whole log."""

    ship: Shipment
    policy: Policy

    @property
    def tenant(self) -> str:
        return self.ship.tenant

    def remote(self) -> CheckTask:
        return attrs.evolve(self, ship=self.ship.loaded())


def run_job(job: Callable[[Any], Any], task: Any) -> Any:
    """``job(task)``; for a CheckTask only the check of its partition (None when it passes)."""
    if isinstance(task, CheckTask):
        load(task.ship, task.policy)
        return None
    return job(task)
