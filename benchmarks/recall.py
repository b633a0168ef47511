"""Benchmark the per-call latency of the MCP tool ``recall`` over a store, at several log sizes.

For each size and shape a store is built from a synthetic log
(``benchmarks/synth.py``), then ``recall`` is called for the probe actor at
the probe time, ``--calls`` times each way:

* ``in_process``: ``GammaMCP.call("recall", {})``, the work the server does for
  one call (refresh from the store, resolve, render, build the result);
* ``in_process_keys``: the same with ``keys`` (the probe keys of a turn: 3 keys);
* ``stdio`` / ``stdio_keys``: a round trip from the SDK's ``mcp.Client`` to
  ``gamma mcp STORE`` run as a subprocess (JSON-RPC over pipes, pydantic on
  both sides), after ``initialize``.

Shapes: ``one`` (the probe tenant ``acme`` is about half the log) and ``many``
(1,000 tenants of about equal size, as in benchmarks/engine.py). Figures are
wall-clock milliseconds, p50 and p99 over the calls; JSON to ``--out``
(default stdout)::

    python benchmarks/recall.py --sizes 10000,100000 --out recall.json

This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__test__ = False  # never a pytest module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402
from engine import shape_lines  # noqa: E402  (the same two shapes as the engine's benchmark)


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p99": round(p99, 3), "calls": len(ordered)}


def _stdio(store: Path, actor: dict[str, Any], at: str, keys: list[str], calls: int) -> dict[str, Any]:
    import anyio  # the SDK's event loop
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "GAMMA_NOW": at, "GAMMA_LOG_LEVEL": "off"}
    gamma_bin = str(Path(sys.executable).parent / "gamma")
    params = StdioServerParameters(
        command=gamma_bin, args=["mcp", str(store), "--actor", json.dumps(actor)], env=env
    )
    timings: dict[str, list[float]] = {"all": [], "keys": []}
    started: dict[str, float] = {}

    async def session() -> None:
        t0 = time.perf_counter()
        async with Client(params, mode="legacy") as client:
            started["ready_s"] = time.perf_counter() - t0
            for _ in range(calls):
                a = time.perf_counter()
                result = await client.call_tool("recall", {})
                timings["all"].append((time.perf_counter() - a) * 1e3)
                assert not result.is_error
                a = time.perf_counter()
                result = await client.call_tool("recall", {"keys": keys})
                timings["keys"].append((time.perf_counter() - a) * 1e3)
                assert not result.is_error

    anyio.run(session)
    return {"ready_s": round(started["ready_s"], 2), "stdio_ms": _stats(timings["all"]),
            "stdio_keys_ms": _stats(timings["keys"])}


def run_one(n: int, shape: str, calls: int, folder: Path) -> dict[str, Any]:
    import gamma  # the benchmark's subject
    from gamma.core.terms.canonical import format_ts
    from gamma.integrations.binding import Binding
    from gamma.integrations.mcp import GammaMCP

    lines, actor = shape_lines(n, shape)
    at = synth.probe_time(n)
    store = folder / f"{shape}-{n}.db"
    t0 = time.perf_counter()
    with gamma.Store.init(store) as writer:
        for start in range(0, len(lines), 10_000):
            writer.append(lines[start : start + 10_000])
    load_s = time.perf_counter() - t0
    with gamma.Engine.open(store) as engine:
        server = GammaMCP(Binding(engine, actor, clock=lambda: gamma.core.terms.canonical.parse_at(at)))
        first = server.call("recall", {}).structured_content
        assert first is not None
        keys = sorted({f["key"] for f in first["facts"]})[:3]
        full, keyed = [], []
        for _ in range(calls):
            a = time.perf_counter()
            server.call("recall", {})
            full.append((time.perf_counter() - a) * 1e3)
            a = time.perf_counter()
            server.call("recall", {"keys": keys})
            keyed.append((time.perf_counter() - a) * 1e3)
        reference = engine.resolve(actor, at)
        assert first["facts"][:5] == [
            {"fact": a.fact, "key": a.key, "value": a.value, "scope": a.scope, "authority": a.authority,
             "kind": a.kind, "priority": a.priority, "needs_recheck": a.needs_recheck}
            for a in reference.admitted[:5]
        ] and len(first["facts"]) == len(reference.admitted)
        tenant_facts = len(reference.admitted) + len(reference.excluded)
    row = {
        "events": n, "shape": shape, "tenant_facts": tenant_facts,
        "admitted": len(first["facts"]), "store_load_s": round(load_s, 1),
        "in_process_ms": _stats(full), "in_process_keys_ms": _stats(keyed),
        **_stdio(store, actor, format_ts(gamma.core.terms.canonical.parse_at(at)), keys, calls),
    }
    store.unlink()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated event counts")
    parser.add_argument("--shapes", default="one,many", help="one, many or both")
    parser.add_argument("--calls", type=int, default=20, help="recall calls per way (default 20)")
    parser.add_argument("--out", default=None, help="write the JSON here (default stdout)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in (int(x) for x in args.sizes.split(",")):
            for shape in args.shapes.split(","):
                rows.append(run_one(n, shape, args.calls, Path(folder)))
                print(json.dumps(rows[-1]), file=sys.stderr)
    report = {
        "benchmark": "recall",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "runs": rows,
    }
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
