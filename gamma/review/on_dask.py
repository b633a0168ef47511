"""The Dask executor: one future per partition on a ``distributed.Client``'s cluster.

Imported only when Dask is asked for (it needs the ``gamma[dask]`` extra). A partition
is read from the spool and submitted only when a slot is free (at most ``in_flight``
per worker thread), so neither the client nor the scheduler ever holds the whole log.
Unless the workers share this machine's disk (``shared=True``), each task carries its
partition's bytes and its result comes back as text, so any cluster works. A worker
that dies mid-partition has its task rescheduled by the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from distributed import Client, as_completed

from gamma.review.run import Executor, Failure

__all__ = ["dask"]


def dask(client: Client, *, shared: bool = False, in_flight: int = 2) -> Executor:
    """Run each partition as one task on ``client``'s cluster, a few at a time per thread."""

    def run(job: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        threads = sum(client.nthreads().values()) or 1  # type: ignore[no-untyped-call]
        queue = iter(tasks)
        owner: dict[Any, Any] = {}
        running = as_completed()  # type: ignore[no-untyped-call]

        def submit_next() -> None:
            task = next(queue, None)
            if task is not None:
                future = client.submit(job, task if shared else task.remote(), pure=False)
                owner[future] = task
                running.add(future)  # type: ignore[no-untyped-call]

        for _ in range(threads * in_flight):
            submit_next()
        for future in running:
            task = owner.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # the scheduler gave up on it (KilledWorker)
                result = Failure(task.tenant, f"{type(exc).__name__}: {exc}")
            future.release()
            submit_next()
            yield task, result

    return run
