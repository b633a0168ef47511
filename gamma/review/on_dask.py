"""The Dask executor: a few partitions per future on a ``distributed.Client``'s cluster.

Imported only when Dask is asked for (it needs the optional ``dask`` extra). A batch of
partitions is read from the spool and submitted only when a slot is free (at most
``in_flight`` futures per worker thread), so neither the client nor the scheduler ever
holds the whole log; batching spares a thousand small tenants a thousand round trips
through the scheduler.
Unless the workers share this machine's disk (every worker on this host, or
``shared=True``), each task carries its partition's bytes and its result comes back as
text, so any cluster works. A worker that dies mid-partition has its task rescheduled
by the scheduler.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from distributed import Client, as_completed

from gamma.review.run import Executor, TaskFailure, settle

__all__ = ["dask", "on_this_host", "run_batch", "batches"]


def on_this_host(client: Client) -> bool:
    """Every worker of the cluster runs on this machine (so it sees this disk)."""
    here = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        here.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    workers = client.scheduler_info()["workers"]
    hosts = {urlsplit(address).hostname for address in workers}
    return bool(hosts) and hosts <= here


def run_batch(job: Callable[[Any], Any], tasks: Sequence[Any]) -> list[Any]:
    """A future's work on its worker: ``job`` on each of a few partitions, in order. A Dask
    worker's own state grows as it runs (task, transition and profile logs), so it is frozen
    for the batch (``settle``), else every collection the parsing sets off walks it again;
    it is unfrozen after, so that on a long-lived cluster the collector still frees whatever
    of it later becomes cyclic garbage."""
    settle()
    try:
        return [job(task) for task in tasks]
    finally:
        gc.unfreeze()


def batches(tasks: Sequence[Any], size: int) -> list[tuple[Any, ...]]:
    """``tasks`` in order, ``size`` at a time (the largest partitions come first, so the
    futures at the end, of the smallest, even out the workers' finish)."""
    return [tuple(tasks[i : i + size]) for i in range(0, len(tasks), size)]


def dask(
    client: Client, *, shared: bool | None = None, in_flight: int = 4, batch: int | None = None
) -> Executor:
    """Run the partitions on ``client``'s cluster, ``batch`` per future (None: up to 16,
    and at least eight futures per worker thread), at most ``in_flight`` futures per thread
    at a time; ``shared`` None: the workers share this disk when they all run on this host."""

    def run(job: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        threads = sum(client.nthreads().values()) or 1  # type: ignore[no-untyped-call]
        local = on_this_host(client) if shared is None else shared
        size = batch or max(1, min(16, len(tasks) // (threads * 8)))
        queue = iter(batches(tasks, size))
        owner: dict[Any, tuple[Any, ...]] = {}
        running = as_completed()  # type: ignore[no-untyped-call]

        def submit_next() -> None:
            group = next(queue, None)
            if group is not None:
                shipped = group if local else tuple(task.remote() for task in group)
                future = client.submit(run_batch, job, shipped, pure=False)
                owner[future] = group
                running.add(future)  # type: ignore[no-untyped-call]

        for _ in range(threads * in_flight):
            submit_next()
        for future in running:
            group = owner.pop(future)
            try:
                results = future.result()
            except Exception as exc:  # the scheduler gave up on it (KilledWorker)
                error = f"{type(exc).__name__}: {exc}"
                results = [TaskFailure(task.tenant, error) for task in group]
            future.release()
            submit_next()
            yield from zip(group, results)

    return run
