"""Store throughput: append (batches of 1, 100, 10,000), export and verify, as JSON.

Each figure stands beside the cost of reading the same events back with a
plain ``SELECT`` on the same file, so the overhead of validation, hashing and
durability (WAL, synchronous=FULL, one fsync per batch) is visible.

    python benchmarks/store.py                       # stores of 100k and 1M events
    python benchmarks/store.py --sizes 10000 --out store.json

Not a timed test: numbers depend on the machine and its disk.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from gamma.storage.store import Store

APPEND_RUNS = {1: 200, 100: 20, 10_000: 2}  # batch size -> number of appends measured
PREFILL_BATCH = 10_000


def log_lines(n: int) -> list[str]:
    """A valid synthetic log of ``n`` events (benchmarks/synth.py when present)."""
    try:
        import synth

        found: list[str] = list(synth.lines(n, 0))
        return found
    except ImportError:
        return list(_simple_lines(n))


def _simple_lines(n: int) -> Iterator[str]:
    for i in range(n):
        body: dict[str, Any] = {
            "id": f"e{i}",
            "ts": _ts(i),
            "actor": "bench",
            "tenant": f"t{i % 4}",
        }
        if i % 10 == 9:
            body |= {"type": "retract", "fact": f"F{i - 1}"}
        else:
            body |= {"type": "assert", "fact": f"F{i}", "key": f"k{i % 1000}", "value": i}
        yield json.dumps(body)


def _ts(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + seconds))


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def rate(events: int, seconds: float) -> float:
    return round(events / seconds, 1) if seconds > 0 else float("inf")


def plain_select(path: Path, sql: str, times: int = 1) -> float:
    """Seconds to run ``sql`` ``times`` times and fetch every row with bare sqlite3."""
    conn = sqlite3.connect(path)
    try:
        return timed(lambda: [conn.execute(sql).fetchall() for _ in range(times)])
    finally:
        conn.close()


def measure(size: int, workdir: Path) -> dict[str, Any]:
    extra = sum(batch * runs for batch, runs in APPEND_RUNS.items())
    lines = log_lines(size + extra)
    path = workdir / f"store-{size}.db"
    result: dict[str, Any] = {"events": size}

    Store.init(path).close()
    with Store.open(path) as store:
        seconds = 0.0
        for start in range(0, size, PREFILL_BATCH):
            chunk = lines[start : start + PREFILL_BATCH]
            seconds += timed(partial(store.append, chunk))
        result["prefill"] = {"batch": PREFILL_BATCH, "events_per_s": rate(size, seconds)}

    appends: dict[str, Any] = {}
    offset = size
    for batch, runs in APPEND_RUNS.items():
        with Store.open(path) as store:
            seconds = 0.0
            for _ in range(runs):
                chunk = lines[offset : offset + batch]
                offset += batch
                seconds += timed(partial(store.append, chunk))
        select = plain_select(
            path, f"SELECT * FROM events ORDER BY position DESC LIMIT {batch}", runs
        )
        appends[str(batch)] = {
            "appends": runs,
            "events_per_s": rate(batch * runs, seconds),
            "ms_per_append": round(seconds / runs * 1000, 3),
            "select_events_per_s": rate(batch * runs, select),
        }
    result["append"] = appends

    total = size + extra
    with Store.open(path) as store:
        export_s = timed(lambda: sum(len(line.encode("utf-8")) + 1 for line in store.export()))
        verify_s = timed(store.verify)
    result["export"] = {
        "events_per_s": rate(total, export_s),
        "select_events_per_s": rate(
            total, plain_select(path, "SELECT body FROM events ORDER BY position")
        ),
    }
    result["verify"] = {
        "events_per_s": rate(total, verify_s),
        "select_events_per_s": rate(
            total, plain_select(path, "SELECT * FROM events ORDER BY position")
        ),
    }
    result["file_bytes"] = path.stat().st_size
    path.unlink()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="100000,1000000",
        help="comma-separated store sizes in events (default: 100000,1000000)",
    )
    parser.add_argument("--out", default=None, help="write the JSON here instead of stdout")
    parser.add_argument(
        "--dir", default=None, help="directory for the stores (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        runs = [measure(size, Path(workdir)) for size in sizes]
    report = {
        "benchmark": "store",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "append_runs": {str(k): v for k, v in APPEND_RUNS.items()},
        "sizes": runs,
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
