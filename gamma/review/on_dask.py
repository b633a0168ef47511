"""The Dask executor: one future per partition on a ``distributed.Client``'s cluster.

Imported only when Dask is asked for (it needs the ``gamma[dask]`` extra). A partition
is read from the spool and submitted only when a slot is free (at most ``in_flight``
per worker thread), so neither the client nor the scheduler ever holds the whole log.
Unless the workers share this machine's disk (every worker on this host, or
``shared=True``), each task carries its partition's bytes and its result comes back as
text, so any cluster works. A worker that dies mid-partition has its task rescheduled
by the scheduler.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from distributed import Client, as_completed

from gamma.review.run import Executor, Failure

__all__ = ["dask", "on_this_host"]


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


def dask(client: Client, *, shared: bool | None = None, in_flight: int = 4) -> Executor:
    """Run each partition as one task on ``client``'s cluster, a few at a time per thread;
    ``shared`` None: the workers share this disk when they all run on this host."""

    def run(job: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        threads = sum(client.nthreads().values()) or 1  # type: ignore[no-untyped-call]
        local = on_this_host(client) if shared is None else shared
        queue = iter(tasks)
        owner: dict[Any, Any] = {}
        running = as_completed()  # type: ignore[no-untyped-call]

        def submit_next() -> None:
            task = next(queue, None)
            if task is not None:
                future = client.submit(job, task if local else task.remote(), pure=False)
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
