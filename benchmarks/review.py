"""Access-review throughput: serial vs a process pool of 2 vs a local Dask cluster of 2 workers.

Generates a many-tenant log (``benchmarks/tenants.py``), parses it once, then runs the same
review (``gamma.review.run_review``) three ways in one process, checks the three output trees
are byte-identical, and prints JSON: wall time and events/s per way, the speed-up over serial,
and peak RSS of the parent and of the largest worker.

    python benchmarks/review.py --events 1000000 --tenants 1000 --actors 10000 --out review.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tenants  # noqa: E402

import gamma  # noqa: E402
from gamma.core.canonical import parse_ts  # noqa: E402
from gamma.core.events import parse_actor  # noqa: E402
from gamma.core.policy import DEFAULT_POLICY  # noqa: E402
from gamma.review.run import pool, run_review, serial  # noqa: E402


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _worker_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--actors", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    lines, actor_objs = tenants.log(args.events, args.tenants, args.actors, args.seed)
    events = gamma.parse_events(lines)
    del lines
    actors = [parse_actor(a) for a in actor_objs]
    at = parse_ts(tenants.ts(args.events))
    setup_s = time.perf_counter() - started
    counts: dict[str, int] = {}
    for event in events:
        counts[event.tenant] = counts.get(event.tenant, 0) + 1
    largest = max(counts.values())
    result: dict[str, Any] = {
        "events": len(events), "tenants": args.tenants, "actors": len(actors),
        "largest_tenant_events": largest, "setup_s": round(setup_s, 2),
        "parent_peak_rss_mib_after_parse": _mib(_worker_peak()),
    }  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="gamma-review-bench-"))
    runs: dict[str, Any] = {}
    try:
        ways: list[tuple[str, Any]] = [("serial", serial), ("pool_2", pool(2))]
        for name, executor in ways:
            t0 = time.perf_counter()
            run_review(events, actors, at, DEFAULT_POLICY, work / name, executor=executor)
            wall = time.perf_counter() - t0
            runs[name] = {"wall_s": round(wall, 2), "events_per_s": round(len(events) / wall)}
        runs["pool_2"]["largest_worker_peak_rss_mib"] = _mib(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        )
        if not args.no_dask:
            import distributed  # optional extra, only for this row

            from gamma.review.on_dask import dask

            with distributed.LocalCluster(
                n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
            ) as cluster, distributed.Client(cluster) as client:
                t0 = time.perf_counter()
                run_review(events, actors, at, DEFAULT_POLICY, work / "dask_2",
                           executor=dask(client))  # fmt: skip
                wall = time.perf_counter() - t0
                peaks = client.run(_worker_peak)
            runs["dask_2"] = {
                "wall_s": round(wall, 2), "events_per_s": round(len(events) / wall),
                "worker_peak_rss_mib": sorted(_mib(v) for v in peaks.values()),
            }  # fmt: skip
        base = _tree(work / "serial")
        result["byte_identical"] = all(_tree(work / name) == base for name in runs)
        for name in runs:
            runs[name]["speedup_over_serial"] = round(
                runs["serial"]["wall_s"] / runs[name]["wall_s"], 2
            )
        result["runs"] = runs
        result["parent_peak_rss_mib"] = _mib(_worker_peak())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
