"""The Dask executor: partitions scattered to a ``distributed.Client``'s workers.

Imported only when Dask is asked for (it needs the ``gamma[dask]`` extra).
A worker that dies mid-partition has its task rescheduled by the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from distributed import Client, as_completed

from gamma.review.run import Executor, Failure

__all__ = ["dask"]


def dask(client: Client) -> Executor:
    """Run each partition as one task on ``client``'s cluster."""

    def run(job: Callable[[Any], Any], parts: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        futures = client.map(job, parts, pure=False)
        owner = {future.key: part for future, part in zip(futures, parts)}
        for future in as_completed(futures):  # type: ignore[no-untyped-call]
            part = owner[future.key]
            try:
                yield part, future.result()
            except Exception as exc:  # the scheduler gave up on it (KilledWorker)
                yield part, Failure(part.tenant, f"{type(exc).__name__}: {exc}")

    return run
