"""Run the per-tenant tasks on an executor and publish DIR, byte-identical whatever ran them.

An executor is a callable ``(job, tasks) -> iterator of (task, result | TaskFailure)`` in any
order: ``serial``, ``pool(n)`` (a process pool of fresh interpreters whose dead workers'
tasks are re-run) or ``gamma.review.on_dask.dask(client)``. The parent streams the log once
(``gamma.review.spool``), ships each tenant's partition, and only renames the files its
workers wrote (or writes the text a remote worker sent back) and writes ``summary.json``.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import secrets
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from gamma.audit.replay import record_policy
from gamma.core.terms.canonical import canonical_json, compact_json, format_ts, parse_ts
from gamma.core.terms.errors import GammaError, InputError
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import Policy
from gamma.review.replays import RecordOutcome, RecordTask
from gamma.review.spool import Log, LogLike, Split, open_source, split, tenant_file
from gamma.review.tasks import (
    CheckTask,
    ReplayTask,
    ReviewDone,
    ReviewTask,
    Shipment,
    replay_job,
    review_job,
    run_job,
    write_temp,
)

__all__ = [
    "TaskFailure", "Executor", "serial", "pool", "guarded", "in_worker", "settle", "run_review", "run_replays",
]  # fmt: skip


@attrs.frozen
class TaskFailure:
    """A task whose job raised: its tenant and the error (kept whole when it is bad input)."""

    tenant: str
    error: str
    input_error: InputError | None = attrs.field(default=None, eq=False)


TaskOutcome = ReviewDone | TaskFailure
#: (job, tasks) -> (task, outcome) pairs in any order; a task has a ``tenant``
Executor = Callable[[Callable[[Any], Any], Sequence[Any]], Iterator[tuple[Any, Any]]]


def guarded(job: Callable[[Any], Any], task: Any) -> Any:
    """``job(task)``, with an error turned into a TaskFailure naming the tenant."""
    try:
        return job(task)
    except InputError as exc:  # the partition is bad input: the run exits 2, naming the line
        return TaskFailure(task.tenant, str(exc), exc)
    except Exception as exc:  # any error in one tenant must not lose the others
        last = traceback.format_exception_only(exc)[-1].strip()
        return TaskFailure(task.tenant, last)


_settled = False


def in_worker(job: Callable[[Any], Any], task: Any) -> Any:
    """``job(task)`` in a worker process. The first time, what is alive after the worker's
    start-up (its modules; a Dask worker's own state) is frozen out of the collector's reach
    (``gc.freeze``): else every full collection a partition's parsing sets off walks it again,
    which made a Dask worker's collections take twice a pool worker's for the same tenants."""
    global _settled
    if not _settled:
        _settled = True
        settle()
    return job(task)


def settle() -> None:
    """Collect, then freeze what survives: a worker's own long-lived state, not a partition's."""
    gc.collect()
    gc.freeze()


def serial(job: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
    """One after another, in this process."""
    for task in tasks:
        yield task, job(task)


def pool(workers: int, *, rounds: int = 3) -> Executor:
    """A pool of ``workers`` fresh interpreters (``spawn``: nothing of this process is
    inherited); tasks of a worker that died are re-run in a new pool, up to ``rounds`` times."""
    context = multiprocessing.get_context("spawn")

    def run(job: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        todo = list(tasks)
        for attempt in range(rounds):
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as executor:
                futures: dict[Future[Any], Any] = {executor.submit(in_worker, job, t): t
                                                 for t in todo}
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
                for task in todo:
                    yield task, TaskFailure(task.tenant, f"worker died {rounds} times")

    return run


def _source(log: LogLike | Log, policy: Policy | None) -> Log:
    return log if isinstance(log, Log) else open_source(log, policy)


def _largest_first(tasks: Iterable[Any]) -> list[Any]:
    """Big partitions first, so two workers finish together (the output does not depend on it)."""
    return sorted(tasks, key=lambda t: (-t.ship.events, t.tenant))


def _write_summary(path: Path, fields: dict[str, Any], tenants: Mapping[str, ReviewDone]) -> None:
    """``canonical_json({**fields, "tenants": ...})`` + newline, streamed from each tenant's
    canonical summary text (its temporary file, read one at a time), under a temporary name
    renamed when complete. ``tenants`` sorts after every other field."""
    if any(key >= "tenants" for key in fields):
        raise ValueError("the tenants field must close the summary")
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    with open(temp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(canonical_json(fields)[:-1] + ',"tenants":{')
        for i, tenant in enumerate(sorted(tenants)):
            text = Path(str(tenants[tenant].summary_temp)).read_text("utf-8")
            handle.write(("," if i else "") + compact_json(tenant) + ":" + text)
        handle.write("}}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def run_review(
    log: LogLike | Log,
    actors: Sequence[Actor],
    at: datetime,
    policy: Policy | None,
    out: str | Path,
    *,
    since: datetime | None = None,
    executor: Executor = serial,
    job: Callable[[ReviewTask], ReviewDone] = review_job,
    on_done: Callable[[ReviewTask, TaskOutcome], None] | None = None,
) -> dict[str, Any]:
    """Review every actor at ``at``; write ``out/tenants/*.jsonl`` and ``out/summary.json``.

    ``log`` is a path (JSONL file or store), the log's lines or events, or an opened
    ``Log``; ``policy`` None means a store's own, else the default. ``job`` must be picklable
    for a pool or Dask. Bad input anywhere (also found by a worker) raises InputError and
    publishes nothing. Returns ``summary.json`` without its per-tenant detail: ``tenants``
    lists the tenants written, ``failed`` those whose job raised (their files are removed,
    every other tenant's are written).
    """
    if since is not None and since > at:
        raise GammaError(f"since {format_ts(since)} is after at {format_ts(at)}")
    root = Path(out)
    folder = root / "tenants"
    folder.mkdir(parents=True, exist_ok=True)
    source = _source(log, policy)
    token = secrets.token_hex(6)
    by_tenant: dict[str, list[Actor]] = {}
    for actor in sorted(actors, key=lambda a: (a.tenant, a.id)):
        by_tenant.setdefault(actor.tenant, []).append(actor)
    done: dict[str, ReviewDone] = {}
    failed: dict[str, TaskFailure] = {}
    try:
        with tempfile.TemporaryDirectory(prefix=".partitions-", dir=root) as spool:
            times = [at] if since is None else [at, since]
            found = split(source, Path(spool), times=times)
            head, tree = found.heads[found.upto[at]]
            since_head, since_tree = (None, None) if since is None else found.heads[found.upto[since]]
            tasks = _largest_first(
                ReviewTask(ship=_ship(found, tenant, source), actors=tuple(members), at=at,
                           head=head, tree=tree, policy=source.policy, since=since,
                           since_head=since_head, since_tree=since_tree, out=str(folder),
                           token=token)
                for tenant, members in by_tenant.items()
            )  # fmt: skip
            tasks += _checks(found, set(by_tenant), source)
            for task, outcome in executor(functools.partial(guarded, functools.partial(run_job, job)),
                                          tasks):  # fmt: skip
                if outcome is None:  # a tenant only checked: nothing to write or report
                    continue
                if isinstance(outcome, TaskFailure):
                    failed[outcome.tenant] = outcome
                else:
                    done[outcome.tenant] = _spill(outcome, folder, token)
                if on_done is not None:
                    on_done(task, outcome)
    finally:
        if source.store is not None:
            source.store.close()
    bad = [f.input_error for f in failed.values() if f.input_error is not None]
    try:
        if bad:
            raise min(bad, key=lambda e: (e.line or 0, str(e)))
        for tenant in sorted(done):
            _publish(folder / tenant_file(tenant), done[tenant])
        for tenant in failed:  # a file left by an earlier run must not pass for this one's
            (folder / tenant_file(tenant)).unlink(missing_ok=True)
    except BaseException:
        _sweep(folder, token)
        raise
    fields = {
        "at": format_ts(at),
        "failed": [{"tenant": t, "error": failed[t].error} for t in sorted(failed)],
        "log": head if by_tenant else None,
        "policy": source.policy.digest,
        "since": None if since is None else format_ts(since),
    }
    try:
        _write_summary(root / "summary.json", fields, done)
    finally:
        _sweep(folder, token)
    return {**fields, "events": found.total, "tenants": sorted(done)}


def _ship(found: Split, tenant: str, source: Log) -> Shipment:
    return Shipment(tenant=tenant, events=found.spooled.get(tenant, 0), path=str(found.path),
                    chunks=tuple(found.chunks.get(tenant, ())), source=source.source)  # fmt: skip


def _checks(found: Split, resolved: set[str], source: Log) -> list[CheckTask]:
    """The tenants no job resolves, only to be checked (last: they write nothing)."""
    return [
        CheckTask(ship=_ship(found, tenant, source), policy=source.policy)
        for tenant in sorted(found.spooled) if tenant not in resolved
    ]


def _spill(done: ReviewDone, folder: Path, token: str) -> ReviewDone:
    """Texts a remote worker sent back, to temporary files at once: the parent holds none."""
    if done.lines is None and done.summary is None:
        return done
    name = tenant_file(done.tenant)
    temp = done.temp or str(write_temp(folder, name, done.lines or "", token))
    summary = done.summary_temp or str(write_temp(folder, name + ".summary", done.summary or "",
                                                  token, sync=False))  # fmt: skip
    return attrs.evolve(done, temp=temp, lines=None, summary_temp=summary, summary=None)


def _publish(path: Path, done: ReviewDone) -> None:
    os.replace(str(done.temp), path)


def _sweep(folder: Path, token: str) -> None:
    """Remove this run's temporary files (a killed worker's, or those of a run refused)."""
    for stray in folder.glob(f".*.{token}.*.tmp"):
        stray.unlink(missing_ok=True)


def run_replays(
    log: LogLike | Log,
    records: Mapping[str, dict[str, Any]],
    policy: Policy | None = None,
    *,
    executor: Executor = serial,
) -> tuple[tuple[RecordOutcome, ...], tuple[TaskFailure, ...]]:
    """Replay every record (name -> record) by tenant; outcomes sorted by name, and failures.

    Each record is replayed under the policy it was made under (``record_policy``: the
    store's own, then the named policies), or under ``policy`` when one is given (a record
    made under another is then reported different). PolicyError, before any work, when a
    record's policy is none of those.
    """
    source = _source(log, policy)
    try:
        candidates = [] if source.store_policy is None else [("the store's policy", source.store_policy)]
        chosen = {
            name: policy or record_policy(record, candidates, source=name)
            for name, record in sorted(records.items())
        }
        tenants: dict[str, list[str]] = {}
        for name in sorted(records):
            tenants.setdefault(str(records[name]["actor"]["tenant"]), []).append(name)
        counts = {name: int(r["events"]) for name, r in records.items()}
        ats = {name: parse_ts(r["at"]) for name, r in records.items()}
        with tempfile.TemporaryDirectory(prefix="gamma-replay-") as spool:
            found = split(source, Path(spool), times=list(ats.values()), counts=counts.values())

            def task(name: str) -> RecordTask:
                heard = min(counts[name], found.upto[ats[name]])
                (head, tree), (heard_head, heard_tree) = found.heads[counts[name]], found.heads[heard]
                return RecordTask(name=name, record=records[name], policy=chosen[name], head=head,
                                  tree=tree, heard=heard, heard_head=heard_head,
                                  heard_tree=heard_tree)  # fmt: skip

            tasks = _largest_first(
                ReplayTask(ship=_ship(found, tenant, source), available=found.total,
                           records=tuple(task(name) for name in names))
                for tenant, names in tenants.items()
            )  # fmt: skip
            tasks += _checks(found, set(tenants), source)
            outcomes: list[RecordOutcome] = []
            failed: list[TaskFailure] = []
            job = functools.partial(guarded, functools.partial(run_job, replay_job))
            for _, outcome in executor(job, tasks):
                if outcome is None:  # a tenant only checked: nothing to write or report
                    continue
                if isinstance(outcome, TaskFailure):
                    failed.append(outcome)
                else:
                    outcomes.extend(outcome)
    finally:
        if source.store is not None:
            source.store.close()
    bad = [f.input_error for f in failed if f.input_error is not None]
    if bad:
        raise min(bad, key=lambda e: (e.line or 0, str(e)))
    return (
        tuple(sorted(outcomes, key=lambda o: o.name)),
        tuple(sorted(failed, key=lambda f: f.tenant)),
    )
