"""A host that makes cyclic garbage on one thread while another runs engine turns.

gamma leaves the process's garbage collector alone: it never pauses it, so a host's
garbage is collected while gamma works. This shows it. In one fresh process per mode, a
``gamma.Engine`` in memory takes turns, each: append the next 5 events of a synthetic log
spread over ``--tenants`` tenants (``benchmarks/synth.py`` streams, one per tenant, merged
by ts and made lazily), resolve the probe actor of the last event's tenant and render the
context block. Meanwhile a host thread makes reference cycles (two objects pointing at each
other, one holding ``--payload`` bytes), ``--burst`` of them at a time with a millisecond's
rest between bursts, and drops them at once: only the cyclic collector can free them.

Modes: ``garbage`` (the host thread on) and ``quiet`` (off, the engine alone: its log
grows, so RSS grows with it). Every ``--turns // --samples`` turns the run notes the RSS
(``/proc/self/statm``), the cycles made and not yet freed (``alive``: each cycle's finalizer
counts it freed) and the collections run per generation. ``excess_rss_mib`` is, per sample,
the garbage run's RSS minus the quiet run's: flat when the host's garbage is collected as it
comes, growing when it piles up. ``--baseline DIR`` runs the garbage mode once more with
``DIR`` first on ``PYTHONPATH`` (another checkout's ``gamma``, e.g. one that paused the
collector). JSON goes to ``--out`` (default stdout)::

    python benchmarks/gc_host.py --turns 100000 --out gc_host.json
    python benchmarks/gc_host.py --turns 2000                     # a quick run

This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__test__ = False  # never a pytest module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


class _Counts:
    """Cycles made (written by the host thread only) and freed (by finalizers, which the
    collector runs one collection at a time)."""

    made = 0
    freed = 0


class _Node:
    """Half of a cycle; its finalizer counts the cycle freed once (the half that holds the
    payload)."""

    __slots__ = ("other", "payload")

    def __init__(self, payload: bytes | None) -> None:
        self.other: _Node | None = None
        self.payload = payload

    def __del__(self) -> None:
        if self.payload is not None:
            _Counts.freed += 1


def _host(stop: threading.Event, burst: int, payload: int) -> None:
    """Makes cycles and drops them, ``burst`` at a time, resting a millisecond between."""
    while not stop.is_set():
        for _ in range(burst):
            a, b = _Node(bytes(payload)), _Node(None)
            a.other, b.other = b, a
        _Counts.made += burst
        del a, b
        time.sleep(0.001)


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return round(int(statm.read().split()[1]) * PAGE / 2**20, 1)


def _events(turns: int, tenants: int) -> Iterator[dict[str, Any]]:
    """``5 * turns`` events: ``tenants`` synth streams, each in a tenant of its own, by ts."""
    per = -(-5 * turns // tenants)

    def stream(k: int) -> Iterator[dict[str, Any]]:
        prefix = f"t{k:04d}"
        for event in synth.generate(per, seed=k):
            out = dict(event, tenant=prefix, id=f"{prefix}-{event['id']}")
            for name in ("fact", "experience"):
                if name in out:
                    out[name] = f"{prefix}-{out[name]}"
            for name in ("supersedes", "depends_on", "uses"):
                if name in out:
                    out[name] = [f"{prefix}-{x}" for x in out[name]]
            yield out

    merged = heapq.merge(*(stream(k) for k in range(tenants)), key=lambda e: e["ts"])
    for i, event in enumerate(merged):
        if i == 5 * turns:
            return
        yield event


def run_one(mode: str, turns: int, tenants: int, samples: int, burst: int, payload: int) -> dict[str, Any]:
    import gc

    import gamma  # the subject

    events = _events(turns, tenants)
    at = synth.probe_time(-(-5 * turns // tenants))
    engine = gamma.Engine()
    stop = threading.Event()
    host = threading.Thread(target=_host, args=(stop, burst, payload), daemon=True)
    every = max(1, turns // samples)
    rows: list[dict[str, Any]] = []
    turn_ms: list[float] = []
    started = time.perf_counter()
    if mode != "quiet":
        host.start()
    for turn in range(turns):
        batch = [next(events) for _ in range(5)]
        t0 = time.perf_counter()
        engine.append(batch)
        actor = dict(synth.PROBE_ACTOR, tenant=batch[-1]["tenant"])
        engine.resolve(actor, at).render("context")
        turn_ms.append((time.perf_counter() - t0) * 1e3)
        if (turn + 1) % every == 0 or turn + 1 == turns:
            rows.append({
                "turn": turn + 1,
                "events": len(engine),
                "rss_mib": _rss_mib(),
                "made": _Counts.made,
                "alive": _Counts.made - _Counts.freed,
                "collections": [g["collections"] for g in gc.get_stats()],
                "s": round(time.perf_counter() - started, 2),
            })  # fmt: skip
    stop.set()
    if host.is_alive():
        host.join()
    ordered = sorted(turn_ms)
    half = rows[len(rows) // 2 :]
    return {
        "mode": mode,
        "gamma": gamma.__file__,
        "turns": turns,
        "events": len(engine),
        "seconds": round(time.perf_counter() - started, 1),
        "turn_ms": {
            "p50": round(statistics.median(ordered), 3),
            "p99": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 3),
        },
        "cycles_made": _Counts.made,
        "garbage_made_mib": round(_Counts.made * payload / 2**20, 1),
        "alive_max": max(r["alive"] for r in rows),
        "alive_max_second_half": max(r["alive"] for r in half),
        "rss_mib_first": rows[0]["rss_mib"],
        "rss_mib_last": rows[-1]["rss_mib"],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "samples": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--burst", type=int, default=200, help="cycles per burst")
    parser.add_argument("--payload", type=int, default=1024, help="bytes each cycle holds")
    parser.add_argument("--modes", default="garbage,quiet")
    parser.add_argument("--baseline", default=None, help="also a garbage run of this checkout")
    parser.add_argument("--out", default=None)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the mode, in the child
    args = parser.parse_args(argv)
    knobs = (args.turns, args.tenants, args.samples, args.burst, args.payload)
    if args.one:
        print(json.dumps(run_one(args.one, *knobs)))
        return 0
    runs: dict[str, dict[str, Any]] = {}
    plan = [(mode, None) for mode in args.modes.split(",")]
    if args.baseline:
        plan.append(("garbage", args.baseline))
    for mode, path in plan:
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (path, env.get("PYTHONPATH"))))
        child = [sys.executable, __file__, "--one", mode, "--turns", str(args.turns),
                 "--tenants", str(args.tenants), "--samples", str(args.samples),
                 "--burst", str(args.burst), "--payload", str(args.payload)]  # fmt: skip
        done = subprocess.run(child, check=True, capture_output=True, text=True, env=env)
        name = "baseline_garbage" if path else mode
        runs[name] = json.loads(done.stdout)
        summary = {k: v for k, v in runs[name].items() if k != "samples"}
        print(json.dumps({name: summary}), file=sys.stderr)
    report: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/gc_host.py", *(argv or sys.argv[1:])]),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "runs": runs,
    }
    for name in ("garbage", "baseline_garbage"):
        if name in runs and "quiet" in runs:
            excess = [
                round(g["rss_mib"] - q["rss_mib"], 1)
                for g, q in zip(runs[name]["samples"], runs["quiet"]["samples"], strict=False)
            ]
            report[f"excess_rss_mib_{name}"] = excess
            report[f"excess_rss_mib_{name}_range"] = [min(excess), max(excess)]
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
