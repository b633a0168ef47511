"""Access-review throughput: serial vs a process pool of 2 vs a local Dask cluster of 2 workers.

Writes a many-tenant JSONL log (``benchmarks/tenants.py``, generated in a child process so
this one never holds it), then runs the same review (``gamma.review.run_review`` on the
file, as ``gamma review`` does) three ways in one run, checks the three output trees are
byte-identical, and prints JSON: wall time and events/s per way, the speed-up over serial,
the peak RSS of this (the parent) process and of every worker, the largest tenant, and
``/proc/loadavg`` before and after each way (the machine is shared).

    python benchmarks/review.py --events 1000000 --tenants 1000 --actors 10000 --out review.json

``--dask-batch N`` (repeatable) runs the Dask row with N partitions per future, once per N.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
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

from gamma.core.reading.events import parse_actor  # noqa: E402
from gamma.core.terms.canonical import parse_ts  # noqa: E402
from gamma.review.run import pool, run_review, serial  # noqa: E402
from gamma.review.tasks import ReviewDone, ReviewTask, review_job  # noqa: E402

PEAKS = "GAMMA_BENCH_PEAKS"


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _digest(root: Path) -> str:
    """One digest of every file's name and bytes under ``root``."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _peak() -> int:
    """This process's own peak RSS in KiB (VmHWM: unlike ru_maxrss, not inherited by a child)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measured_job(task: ReviewTask) -> ReviewDone:
    """``review_job``, noting this worker's peak RSS and CPU seconds so far in a file named
    by its pid (CPU time says what the run would take on an idle machine, load aside)."""
    done = review_job(task)
    folder = os.environ.get(PEAKS)
    if folder:
        Path(folder, str(os.getpid())).write_text(f"{_peak()} {time.process_time()}")
    return done


def _write_log(path: str, n: int, tenant_count: int, actor_count: int, seed: int) -> None:
    lines, actors = tenants.log(n, tenant_count, actor_count, seed)
    counts: dict[str, int] = {}
    for line in lines:
        tenant = json.loads(line)["tenant"]
        counts[tenant] = counts.get(tenant, 0) + 1
    Path(path).write_text("\n".join(lines) + "\n")
    Path(path + ".actors.json").write_text(json.dumps({"actors": actors, "counts": counts}))


def _workers(folder: Path) -> tuple[list[float], list[float]]:
    """Each worker's peak RSS (MiB) and CPU seconds, from the files it wrote; then forget them."""
    rows = [p.read_text().split() for p in folder.iterdir()]
    shutil.rmtree(folder)
    folder.mkdir()
    return sorted(_mib(int(r[0])) for r in rows), sorted(round(float(r[1]), 1) for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--actors", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--dask-batch", type=int, action="append", default=None,
                    help="partitions per Dask future (repeat for several Dask rows; default: auto)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gamma-review-bench-"))
    peaks = work / "peaks"
    peaks.mkdir()
    os.environ[PEAKS] = str(peaks)
    log = str(work / "log.jsonl")
    started = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(
        target=_write_log, args=(log, args.events, args.tenants, args.actors, args.seed)
    )
    child.start()
    child.join()
    meta = json.loads(Path(log + ".actors.json").read_text())
    actors = [parse_actor(a) for a in meta["actors"]]
    at = parse_ts(tenants.ts(args.events))
    result: dict[str, Any] = {
        "events": args.events, "tenants": args.tenants, "actors": len(actors),
        "largest_tenant_events": max(meta["counts"].values()),
        "log_mib": round(os.path.getsize(log) / 2**20, 1),
        "setup_s": round(time.perf_counter() - started, 2),
        "parent_peak_rss_mib_before_runs": _mib(_peak()),
    }  # fmt: skip
    del meta
    runs: dict[str, Any] = {}

    def timed(name: str, executor: Any) -> None:
        before = _load()
        t0, cpu0 = time.perf_counter(), time.process_time()
        run_review(log, actors, at, None, work / name, executor=executor, job=measured_job)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        runs[name] = {"wall_s": round(wall, 2), "events_per_s": round(args.events / wall),
                      "parent_cpu_s": round(cpu, 1), "loadavg_before": before,
                      "loadavg_after": _load(), "digest": _digest(work / name)}  # fmt: skip
        shutil.rmtree(work / name)

    def workers(name: str) -> None:
        rss, cpu = _workers(peaks)
        runs[name]["worker_peak_rss_mib"], runs[name]["worker_cpu_s"] = rss, cpu
        # on an idle machine the run lasts about the parent's own work plus its busiest worker
        runs[name]["idle_machine_speedup_estimate"] = round(
            runs["serial"]["parent_cpu_s"] / (runs[name]["parent_cpu_s"] + max(cpu)), 2
        )

    try:
        timed("serial", serial)
        runs["serial"]["parent_peak_rss_mib"] = _mib(_peak())
        _workers(peaks)
        timed("pool_2", pool(2))
        workers("pool_2")
        runs["pool_2"]["parent_peak_rss_mib"] = _mib(_peak())
        if not args.no_dask:
            import distributed  # optional extra, only for this row

            from gamma.review.on_dask import dask

            for size in args.dask_batch or [None]:
                name = "dask_2" if size is None else f"dask_2_batch_{size}"
                with distributed.LocalCluster(
                    n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
                ) as cluster, distributed.Client(cluster) as client:
                    timed(name, dask(client, batch=size))
                workers(name)
        digests = {run.pop("digest") for run in runs.values()}
        result["byte_identical"] = len(digests) == 1
        for name in runs:
            runs[name]["speedup_over_serial"] = round(
                runs["serial"]["wall_s"] / runs[name]["wall_s"], 2
            )
        result["runs"] = runs
        result["parent_peak_rss_mib"] = _mib(_peak())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
