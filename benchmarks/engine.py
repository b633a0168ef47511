"""Benchmark gamma.Engine per turn against the pure fold, at several log sizes.

For each size and shape, in one fresh process: a synthetic log
(``benchmarks/synth.py``) is loaded into an in-memory ``gamma.Engine`` minus
its last ``5 * turns`` events; then each turn appends the next 5 events,
resolves the probe actor at the probe time and renders the context, and
(separately) ``check``s 20 facts of the actor's tenant. Beside it, the pure
``gamma.resolve`` over every event so far (already parsed) plus the same
render, per turn, ``--pure-runs`` times (over the log parsed once by ``gamma.parse_events``,
untimed, as a host holding its log parsed would; the engine's JSON and context block are
checked equal to the pure path's).

Shapes: ``one`` (the synth log; the probe tenant ``acme`` holds about half of
it, as in benchmarks/resolve.py) and ``many`` (1,000 tenants of about equal
size: 1,000 small synth logs, each folded into one tenant, interleaved by ts).

Figures are wall-clock milliseconds (``perf_counter``), p50 and p99 over
the turns (``--turns``, default 200; the probe actor's class is computed once before
them, untimed, as a host's engine has it: a class's first call is ``--first-call``'s);
``whole_turn_ms`` adds the check of 20 facts to append, resolve and render (the issue's
turn). ``engine_rss_mib`` is ``ru_maxrss`` of the run's process after the turns, before
the pure path runs in it; ``pure_rss_mib`` that of a process of its own that holds the same
lines, parses them and resolves once (``rss_over_pure``: the first over the second; both
hold the log's lines as text). JSON goes to ``--out`` (default stdout)::

    python benchmarks/engine.py --sizes 10000,100000 --out engine.json

``--first-call`` measures instead the first call for an actor class the engine has not
seen (issue 28): the whole log loaded, the probe actor resolved once, then each of
``FIRST_CLASSES`` (other roles, clearance, scope, actor id of the probe's tenant) resolved
for the first time (wall and CPU ms: the machine may be shared), a second time, and by the
pure path; p50 and max per size::

    python benchmarks/engine.py --first-call --sizes 10000,100000 --out first.json

This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__test__ = False  # never a pytest module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402

TENANTS_MANY = 1000

#: The new classes of ``--first-call``: changes of the probe actor (roles, clearance, scope,
#: and at last an id some fact names), each a class the engine has not seen.
FIRST_CLASSES: tuple[dict[str, Any], ...] = (
    {"roles": ["hr"]},
    {"roles": ["legal", "ops"]},
    {"roles": []},
    {"clearance": "secret"},
    {"clearance": "public", "roles": ["finance"]},
    {"scope": "helios"},
    {"scope": "apollo/eu"},
    {"scope": "global", "roles": ["sales", "hr"]},
    {"id": "bob", "roles": ["ops"]},
)


def _prefixed(event: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One synth event moved into tenant ``prefix``, every id and reference prefixed."""
    out = dict(event, tenant=prefix, id=f"{prefix}-{event['id']}")
    for name in ("fact", "experience"):
        if name in out:
            out[name] = f"{prefix}-{out[name]}"
    for name in ("supersedes", "depends_on", "uses"):
        if name in out:
            out[name] = [f"{prefix}-{x}" for x in out[name]]
    return out


def shape_lines(n: int, shape: str) -> tuple[list[str], dict[str, Any]]:
    """The log's JSON lines and the probe actor."""
    if shape == "one":
        return list(synth.lines(n)), dict(synth.PROBE_ACTOR)
    per = max(1, n // TENANTS_MANY)
    streams = [
        [_prefixed(e, f"t{k:04d}") for e in synth.generate(per, seed=k)] for k in range(TENANTS_MANY)
    ]
    merged = heapq.merge(*streams, key=lambda e: e["ts"])
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return [dumps(e) for e in merged], dict(synth.PROBE_ACTOR, tenant="t0000")


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p99": round(p99, 3), "runs": len(ordered)}


def run_one(n: int, shape: str, turns: int, pure_runs: int) -> dict[str, Any]:
    import gamma  # the benchmark's subject

    lines, actor = shape_lines(n, shape)
    at = synth.probe_time(n)
    held = 5 * turns
    engine = gamma.Engine()
    t0 = time.perf_counter()
    for start in range(0, len(lines) - held, 10_000):
        engine.append(lines[start : min(start + 10_000, len(lines) - held)])
    load_s = time.perf_counter() - t0
    first = engine.resolve(actor, at)  # the class computed, as a host's engine has it
    first.render("context")
    engine.check(actor, at, [x.fact for x in first.excluded][:20])
    gc.collect()
    append_ms, resolve_ms, render_ms, turn_ms, check_ms, whole_ms = [], [], [], [], [], []
    rest = lines[len(lines) - held :]
    for turn in range(turns):
        a = time.perf_counter()
        engine.append(rest[5 * turn : 5 * turn + 5])
        b = time.perf_counter()
        resolution = engine.resolve(actor, at)
        c = time.perf_counter()
        resolution.render("context")
        d = time.perf_counter()
        append_ms.append((b - a) * 1e3)
        resolve_ms.append((c - b) * 1e3)
        render_ms.append((d - c) * 1e3)
        turn_ms.append((d - a) * 1e3)
        facts = [x.fact for x in resolution.admitted][:10] + [x.fact for x in resolution.excluded][:10]
        e = time.perf_counter()
        engine.check(actor, at, facts)
        check_ms.append((time.perf_counter() - e) * 1e3)
        whole_ms.append(turn_ms[-1] + check_ms[-1])
    engine_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The pure path folds the log as the reader gives it (a ParsedLog, parsed once, untimed):
    # engine.events is a plain tuple, which gamma.resolve would first re-validate event by event.
    events = gamma.parse_events(lines, policy=engine.policy)
    pure_ms = []
    for _ in range(pure_runs):
        a = time.perf_counter()
        pure = gamma.resolve(events, actor, at, engine.policy)
        pure.render("context")
        pure_ms.append((time.perf_counter() - a) * 1e3)
    kept = engine.resolve(actor, at)
    assert pure.to_json() == kept.to_json()
    assert pure.render("context") == kept.render("context")
    turn = _stats(turn_ms)
    pure = _stats(pure_ms)
    return {
        "events": len(engine.events),
        "shape": shape,
        "tenant_facts": len(resolution.admitted) + len(resolution.excluded),
        "load_s": round(load_s, 2),
        "append_ms": _stats(append_ms),
        "resolve_ms": _stats(resolve_ms),
        "render_ms": _stats(render_ms),
        "turn_ms": turn,
        "check20_ms": _stats(check_ms),
        "whole_turn_ms": _stats(whole_ms),
        "pure_turn_ms": pure,
        "speedup_p50": round(pure["p50"] / turn["p50"], 1),
        "engine_rss_mib": round(engine_rss, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def pure_rss(n: int, shape: str) -> dict[str, Any]:
    """Peak RSS of the pure path alone: the same lines held, parsed, resolved once."""
    import gamma  # the benchmark's subject

    lines, actor = shape_lines(n, shape)
    events = gamma.parse_events(lines)
    gamma.resolve(events, actor, synth.probe_time(n)).render("context")
    return {"pure_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def first_call(n: int, pure_runs: int) -> dict[str, Any]:
    """The first and second call of each new class against the pure path, at ``n`` events."""
    import gamma  # the benchmark's subject

    lines, probe = shape_lines(n, "one")
    at = synth.probe_time(n)
    engine = gamma.Engine()
    for start in range(0, len(lines), 10_000):
        engine.append(lines[start : start + 10_000])
    engine.resolve(probe, at)  # the tenant's fold and one class, as a host has them
    events = gamma.parse_events(lines, policy=engine.policy)
    gc.collect()
    first_ms, first_cpu_ms, second_ms, pure_ms, rows = [], [], [], [], []
    pure_runs = max(pure_runs, 1)  # the pure path is also the check of each class's bytes
    for change in FIRST_CLASSES:
        actor = dict(probe, **change)
        a, cpu = time.perf_counter(), time.process_time()
        kept = engine.resolve(actor, at)
        kept.render("context")
        b, cpu = time.perf_counter(), time.process_time() - cpu
        again = engine.resolve(actor, at)
        again.render("context")
        c = time.perf_counter()
        pure_runs_ms = []
        for _ in range(pure_runs):
            d = time.perf_counter()
            pure = gamma.resolve(events, actor, at, engine.policy)
            pure.render("context")
            pure_runs_ms.append((time.perf_counter() - d) * 1e3)
        assert kept.to_json() == pure.to_json() == again.to_json(), change
        assert kept.render("context") == pure.render("context"), change
        first_ms.append((b - a) * 1e3)
        first_cpu_ms.append(cpu * 1e3)
        second_ms.append((c - b) * 1e3)
        pure_ms.append(statistics.median(pure_runs_ms))
        rows.append({"class": change, "first_ms": round(first_ms[-1], 2),
                     "first_cpu_ms": round(first_cpu_ms[-1], 2),
                     "second_ms": round(second_ms[-1], 3), "pure_ms": round(pure_ms[-1], 1)})

    def summary(values: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3)}

    return {
        "events": len(engine.events),
        "tenant_facts": len(kept.admitted) + len(kept.excluded),
        "first_ms": summary(first_ms),
        "first_cpu_ms": summary(first_cpu_ms),
        "second_ms": summary(second_ms),
        "pure_ms": summary(pure_ms),
        "classes": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--shapes", default="one,many")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--pure-runs", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--first-call", action="store_true", help="the first call of new classes")
    parser.add_argument("--no-pure-rss", action="store_true", help="skip the pure path's RSS")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # n:shape, in the child
    parser.add_argument("--pure-rss", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args(argv)
    if args.one:
        n, shape = args.one.split(":")
        if args.pure_rss:
            print(json.dumps(pure_rss(int(n), shape)))
        elif shape == "first":
            print(json.dumps(first_call(int(n), args.pure_runs)))
        else:
            print(json.dumps(run_one(int(n), shape, args.turns, args.pure_runs)))
        return 0
    results = []
    shapes = ["first"] if args.first_call else args.shapes.split(",")
    for size in (int(s) for s in args.sizes.split(",")):
        for shape in shapes:
            child = [sys.executable, __file__, "--one", f"{size}:{shape}",
                     "--turns", str(args.turns), "--pure-runs", str(args.pure_runs)]
            done = subprocess.run(child, check=True, capture_output=True, text=True)
            results.append(json.loads(done.stdout))
            if shape != "first" and not args.no_pure_rss:
                done = subprocess.run([*child[:4], "--pure-rss"], check=True,
                                      capture_output=True, text=True)  # fmt: skip
                results[-1].update(json.loads(done.stdout))
                results[-1]["rss_over_pure"] = round(
                    results[-1]["engine_rss_mib"] / results[-1]["pure_rss_mib"], 2
                )
            print(json.dumps(results[-1]), file=sys.stderr)
    report = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
        "results": results,
    }
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
