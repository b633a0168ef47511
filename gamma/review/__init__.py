"""Access reviews and audit replays over a log partitioned by tenant.

Isolation makes each tenant's resolutions a function of that tenant's events alone
(plus the whole log's chain and tree heads), so a review is one pure job per tenant
partition. The parent streams the log once and spools each tenant's canonical lines
(``spool``); each worker parses only its partition (``tasks``), serially, in a process
pool or on Dask (``gamma.review.on_dask``, imported only when asked for).
"""

from gamma.review.jobs import Partition, TenantResult, review_tenant
from gamma.review.run import TaskFailure, run_replays, run_review

__all__ = ["Partition", "TenantResult", "TaskFailure", "review_tenant", "run_review", "run_replays"]
