"""Output size and CPU on the adversarial shapes of issue 11 (items 16 and 17).

Each shape is written as a JSONL log to a temporary directory, then resolved by the CLI
(``gamma resolve LOG --format json``) in a fresh process; the script reports the log's
bytes, the output's bytes, their ratio and the wall-clock seconds.

* ``running_balance``: N totals, each depending on and superseding the previous;
* ``key_grants``: N executive facts of one key and N key grants by a peer (each below
  every fact's authority);
* ``toggles``: N grant/revoke toggles of one key for the actor's role, over N/2 facts of
  that key restricted to another role;
* ``revisions``: one key revised N times, N experiences using its first version.

Usage::

    python benchmarks/fail_closed.py --out fail_closed.json          # the issue's sizes
    python benchmarks/fail_closed.py --scale 0.1                     # a tenth of them

This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ACTOR = {"id": "alice", "tenant": "acme", "roles": ["sales"]}


def _stamp(bodies: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for n, body in enumerate(bodies):
        ts = (T0 + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        yield {"id": f"e{n}", "ts": ts, "actor": "w", "tenant": "acme", **body}


def running_balance(n: int) -> Iterator[dict[str, Any]]:
    yield {"type": "assert", "fact": "B0", "key": "balance", "value": 0}
    for i in range(1, n):
        prev = f"B{i - 1}"
        yield {"type": "assert", "fact": f"B{i}", "key": "balance", "value": i,
               "depends_on": [prev], "supersedes": [prev]}


def key_grants(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {"type": "assert", "fact": f"F{i}", "key": "pay", "value": i,
               "authority": "executive", "scope": f"s{i}"}
    for _ in range(n):
        yield {"type": "grant", "key": "pay", "role": "sales", "authority": "peer"}


def toggles(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n // 2):
        yield {"type": "assert", "fact": f"F{i}", "key": "pay", "value": i,
               "scope": f"s{i}", "visibility": {"roles": ["hr"]}}
    for i in range(n):
        yield {"type": "grant" if i % 2 == 0 else "revoke", "key": "pay", "role": "sales"}


def revisions(n: int) -> Iterator[dict[str, Any]]:
    yield {"type": "assert", "fact": "K0", "key": "k", "value": 0}
    for i in range(1, n):
        yield {"type": "assert", "fact": f"K{i}", "key": "k", "value": i}
    for i in range(n):
        yield {"type": "experience", "experience": f"X{i}", "uses": ["K0"], "content": "used K0"}


SHAPES = {"running_balance": (running_balance, 8000), "key_grants": (key_grants, 3000),
          "toggles": (toggles, 6000), "revisions": (revisions, 20000)}


def measure(name: str, n: int, tmp: Path) -> dict[str, Any]:
    shape, _ = SHAPES[name]
    path = tmp / f"{name}.jsonl"
    with path.open("w") as out:
        count = 0
        for event in _stamp(shape(n)):
            out.write(json.dumps(event) + "\n")
            count += 1
    at = (T0 + timedelta(seconds=count)).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = [str(Path(sys.executable).parent / "gamma"), "resolve", str(path), "--format", "json",
               "--actor", json.dumps(ACTOR), "--at", at]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=True)
    seconds = time.perf_counter() - start
    log_bytes = path.stat().st_size
    return {"shape": name, "n": n, "events": count, "log_bytes": log_bytes,
            "output_bytes": len(done.stdout), "ratio": round(len(done.stdout) / log_bytes, 2),
            "seconds": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.shapes.split(","):
            n = max(2, int(SHAPES[name][1] * args.scale))
            results.append(measure(name, n, Path(tmp)))
            print(json.dumps(results[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
