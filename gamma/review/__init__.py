"""Access reviews and audit replays over a log partitioned by tenant.

Isolation makes each tenant's resolutions a function of that tenant's events
alone (plus the whole log's chain head), so a review is one pure job per
tenant partition, run serially, in a process pool or on Dask
(``gamma.review.on_dask``, imported only when asked for).
"""

from gamma.review.jobs import Partition, TenantResult, partition, review_tenant
from gamma.review.run import Failure, run_review

__all__ = ["Partition", "TenantResult", "Failure", "partition", "review_tenant", "run_review"]
