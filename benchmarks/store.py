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
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from gamma.core.integrity import merkle
from gamma.storage import store as store_module
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
    extra = sum(batch * runs for batch, runs in APPEND_RUNS.items()) + 2_000
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
    result["merkle"] = measure_merkle(path, lines[offset:])
    path.unlink()
    return result


def _untreed_append(store: Store, chunk: list[str]) -> None:
    """An append with the Merkle tree switched off (the store's tree code stubbed out)."""
    originals = store_module.tree_rows, store_module.StoredTree
    store_module.tree_rows = lambda compact, bodies: []  # type: ignore[assignment]
    store_module.StoredTree = _NoTree  # type: ignore[assignment,misc]
    try:
        store.append(chunk)
    finally:
        store_module.tree_rows, store_module.StoredTree = originals


class _NoTree:
    def __init__(self, db: object, size: int) -> None:
        pass

    def compact(self) -> merkle.CompactRange:
        return merkle.CompactRange()


def measure_merkle(path: Path, spare: list[str], proofs: int = 300) -> dict[str, Any]:
    """Append cost with the tree beside without (interleaved, batches of 100), then proof
    generation from the store, verification and proof size at the store's size."""
    with Store.open(path) as store:
        size = len(store)
        probes = random.Random(13)
        leaves = [probes.randrange(size) for _ in range(proofs)]
        pairs = sorted((probes.randrange(1, size), size) for _ in range(proofs))
        tree = store.tree()
        started = time.perf_counter()
        inclusion = [merkle.inclusion_proof(store.tree(), i, size) for i in leaves]
        prove_inclusion_s = time.perf_counter() - started
        started = time.perf_counter()
        consistency = [merkle.consistency_proof(store.tree(), a, b) for a, b in pairs]
        prove_consistency_s = time.perf_counter() - started
        bodies = {i: body for i, body in zip(leaves, _bodies(path, leaves), strict=True)}
        started = time.perf_counter()
        assert all(p.verify(bodies[p.leaf_index].encode("utf-8")) for p in inclusion)
        verify_inclusion_s = time.perf_counter() - started
        started = time.perf_counter()
        assert all(p.verify() for p in consistency)
        verify_consistency_s = time.perf_counter() - started
        assert tree.size == size
    copy = path.with_name(path.name + ".untreed")
    shutil.copyfile(path, copy)
    with_tree = without_tree = 0.0
    batch, runs = 100, 20
    with Store.open(path) as treed, Store.open(copy) as untreed:
        for run in range(runs):  # interleaved, the same events on both stores
            chunk = spare[run * batch : (run + 1) * batch]
            with_tree += timed(partial(treed.append, chunk))
            without_tree += timed(partial(_untreed_append, untreed, chunk))
    copy.unlink()
    return {
        "tree_size": size,
        "append_batch_100": {
            "with_tree_events_per_s": rate(batch * runs, with_tree),
            "without_tree_events_per_s": rate(batch * runs, without_tree),
            "overhead_pct": round((with_tree / without_tree - 1) * 100, 1),
        },
        "inclusion": {
            "prove_ms": round(prove_inclusion_s / proofs * 1000, 3),
            "verify_ms": round(verify_inclusion_s / proofs * 1000, 4),
            "max_hashes": max(len(p.path) for p in inclusion),
            "max_bytes": 32 * max(len(p.path) for p in inclusion),
        },
        "consistency": {
            "prove_ms": round(prove_consistency_s / proofs * 1000, 3),
            "verify_ms": round(verify_consistency_s / proofs * 1000, 4),
            "max_hashes": max(len(p.path) for p in consistency),
            "max_bytes": 32 * max(len(p.path) for p in consistency),
        },
    }


def _bodies(path: Path, leaves: list[int]) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        query = "SELECT body FROM events WHERE position = ?"
        return [str(conn.execute(query, [i + 1]).fetchone()[0]) for i in leaves]
    finally:
        conn.close()


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
