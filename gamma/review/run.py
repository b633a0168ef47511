"""Run the per-tenant jobs on an executor and write DIR atomically, byte-identical whatever ran them.

An executor is a callable ``(job, partitions) -> iterator of (partition, result | Failure)``
in any order: ``serial``, ``pool(n)`` (a process pool whose dead workers' partitions are
re-run) or ``gamma.review.on_dask.dask(client)``.
"""

from __future__ import annotations

import functools
import os
import secrets
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs

from gamma.core.canonical import canonical_json, format_ts
from gamma.core.errors import GammaError
from gamma.core.model import Actor, Event
from gamma.core.policy import Policy
from gamma.review.jobs import Partition, TenantResult, partition, review_tenant
from gamma.review.replays import RecordOutcome, partition_records, replay_tenant

__all__ = [
    "Failure", "Executor", "serial", "pool", "guarded", "run_review", "run_replays", "write_atomic",
]  # fmt: skip


@attrs.frozen
class Failure:
    """A partition whose job raised: its tenant and the error."""

    tenant: str
    error: str


Outcome = TenantResult | Failure
#: (job, partitions) -> (partition, outcome) pairs in any order; a partition has a ``tenant``
Executor = Callable[[Callable[[Any], Any], Sequence[Any]], Iterator[tuple[Any, Any]]]


def guarded(job: Callable[[Any], Any], part: Any) -> Any:
    """``job(part)``, with an error turned into a Failure naming the tenant."""
    try:
        return job(part)
    except Exception as exc:  # any error in one tenant must not lose the others
        last = traceback.format_exception_only(exc)[-1].strip()
        return Failure(part.tenant, last)


def serial(job: Callable[[Any], Any], parts: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
    """One after another, in this process."""
    for part in parts:
        yield part, job(part)


def pool(workers: int, *, rounds: int = 3) -> Executor:
    """A process pool of ``workers``; partitions of a worker that died are re-run in a new pool."""

    def run(job: Callable[[Any], Any], parts: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        todo = list(parts)
        for attempt in range(rounds):
            with ProcessPoolExecutor(max_workers=workers) as executor:
                futures: dict[Future[Any], Any] = {
                    executor.submit(job, part): part for part in todo
                }
                todo = []
                pending = set(futures)
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        try:
                            yield futures[future], future.result()
                        except BrokenProcessPool:
                            todo.append(futures[future])
            if not todo:
                return
            if attempt == rounds - 1:
                for part in todo:
                    yield part, Failure(part.tenant, f"worker died {rounds} times")

    return run


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary name in the same directory, then rename: never a half file."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    with open(temp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def tenant_file(tenant: str) -> str:
    """A tenant's JSONL file name (the tenant, percent-encoded)."""
    return quote(tenant, safe="") + ".jsonl"


def run_review(
    events: Iterable[Event],
    actors: Sequence[Actor],
    at: datetime,
    policy: Policy,
    out: str | Path,
    *,
    since: datetime | None = None,
    executor: Executor = serial,
    job: Callable[[Partition], TenantResult] = review_tenant,
    on_done: Callable[[Partition, Outcome], None] | None = None,
) -> dict[str, Any]:
    """Review every actor at ``at``; write ``out/tenants/*.jsonl`` and ``out/summary.json``.

    ``job`` is the per-tenant job (``review_tenant``; it must be picklable for a pool or
    Dask). Returns the summary (``failed`` lists the tenants whose job raised; their
    files are not written, every other tenant's are).
    """
    if since is not None and since > at:
        raise GammaError(f"since {format_ts(since)} is after at {format_ts(at)}")
    root = Path(out)
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    parts = partition(events, actors, at, policy, since=since)
    results: dict[str, TenantResult] = {}
    failed: dict[str, str] = {}
    for part, outcome in executor(functools.partial(guarded, job), parts):
        if isinstance(outcome, Failure):
            failed[outcome.tenant] = outcome.error
        else:
            write_atomic(root / "tenants" / tenant_file(outcome.tenant), outcome.lines)
            results[outcome.tenant] = outcome
        if on_done is not None:
            on_done(part, outcome)
    summary = {
        "at": format_ts(at),
        "since": None if since is None else format_ts(since),
        "policy": policy.digest,
        "log": parts[0].head if parts else None,
        "tenants": {t: results[t].summary for t in sorted(results)},
        "failed": [{"tenant": t, "error": failed[t]} for t in sorted(failed)],
    }
    write_atomic(root / "summary.json", canonical_json(summary) + "\n")
    return summary


def run_replays(
    events: Sequence[Event],
    records: dict[str, dict[str, Any]],
    policy: Policy,
    *,
    executor: Executor = serial,
) -> tuple[tuple[RecordOutcome, ...], tuple[Failure, ...]]:
    """Replay every record (name -> record) by tenant; outcomes sorted by name, and failures."""
    parts = partition_records(events, records, policy)
    outcomes: list[RecordOutcome] = []
    failed: list[Failure] = []
    for _, outcome in executor(functools.partial(guarded, replay_tenant), parts):
        if isinstance(outcome, Failure):
            failed.append(outcome)
        else:
            outcomes.extend(outcome)
    return (
        tuple(sorted(outcomes, key=lambda o: o.name)),
        tuple(sorted(failed, key=lambda f: f.tenant)),
    )
