"""gamma against Memgine per turn: the cost of one more turn on a loaded log.

``memgine.py`` compares whole processes (read the log, build one context); an agent host
keeps its memory loaded and pays, each turn, for what the turn adds. This script measures
that, on the same synthetic logs (``synth.py``) at several sizes (default 1k, 10k, 100k
events), each engine in a fresh child process, alternated ``--rounds`` times:

* ``memgine`` (``statebench==2.0.0``'s ``MemgineEngine``, installed as ``memgine.py`` says):
  the probe actor's identity and every ``assert`` of the probe tenant ingested as in
  ``memgine.py``, one untimed ``build_context``; then per turn, ``ingest_fact`` of the turn's
  5 facts (``supersedes`` where the turn revises a key) and ``build_context(QUERY)``;
* ``gamma``: a ``gamma.Engine`` with the whole log appended (10k lines a batch), one untimed
  resolve + render + check; then per turn, ``append`` of the same 5 facts as JSON lines
  (``assert`` events, the revisions with ``supersedes``), ``resolve`` for the probe actor at
  the probe time, ``render("context")`` and ``check`` of 20 facts (the turn's 5 and 15 fixed
  facts of the log's probe tenant); after the turns, ``--pure-runs`` times the pure path's
  turn, ``gamma.resolve`` over every event (already parsed) + ``render("context")``, and
  whether the engine's context is byte-identical to the pure path's.

A turn's 5 facts (``turn_events``, deterministic): 2 revisions of keys of the probe tenant
(``supersedes`` the key's latest fact, authority ``executive``) and 3 facts of new keys,
all in scope ``helios/launch``, visible to the probe actor, one second after the previous
turn. Memgine's turn omits the check: it has none, so the ratio favours it.

Figures are wall-clock milliseconds (``perf_counter``; ``--clock cpu``: the child's CPU
time, ``process_time``, for a shared machine) per turn, p50 and p99 over
``--turns`` turns (a child stops early after ``--budget`` seconds of turns: ``turns`` says
how many it took); per size, the median of the rounds' p50 and p99, and the ratios
``memgine / gamma``. ``--whole-sizes`` also runs ``memgine.py`` (whole processes) at those
sizes, for its ``speedup_cpu``. The machine may be shared: the load average before and after
each child is kept. At 100k events Memgine's ingest alone takes minutes (its cost grows as
the square of the facts), so a full run takes about 45 minutes. ``--profile N`` instead runs
gamma's turn loop at N events under cProfile and prints the top functions.
``--workload statebench`` takes the log from ``statebench_log.py`` instead (StateBench's own
generator through gamma's importer, about 1,150 tenants; the probe is the busiest tenant's
user, the turns' facts in its scope, ``global``); ``--whole-sizes`` stays on synth. Usage::

    python benchmarks/memgine_turn.py --out memgine_turn.json
    python benchmarks/memgine_turn.py --sizes 1000 --rounds 1 --turns 20   # a quick run
    python benchmarks/memgine_turn.py --profile 10000
    python benchmarks/memgine_turn.py --workload statebench --sizes 10000,100000 --whole-sizes ''

A script, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__test__ = False

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import memgine  # noqa: E402
import statebench_log  # noqa: E402
import synth  # noqa: E402

QUERY = memgine.QUERY
#: The clock of the turns and the pure path (``--clock``); loading is timed on the wall.
CLOCK = [time.perf_counter]
REVISIONS = 2  # of a turn's 5 facts, these revise a key of the log (explicit supersedes)
NEW_KEYS = 3
CHECK_FIXED = 15  # checked each turn beside the turn's own 5 facts
_MEMGINE_AUTHORITIES = ("executive", "manager", "peer", "subordinate", "system", "unverified")


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 4), "p99": round(p99, 4)}


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def workload(name: str, n: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """The log's events, the probe actor and the time asked: ``synth`` (ours; the probe
    tenant holds about half the log; ``synth.probe_time``) or ``statebench``
    (``statebench_log.py``: StateBench's generator, about 1,150 tenants; the probe is the
    busiest tenant's user, asked an hour after the last event)."""
    if name == "statebench":
        lines = statebench_log.lines(n, seed)
        events = [json.loads(line) for line in lines]
        actor: dict[str, Any] = statebench_log.probe(lines)["actor"]
        at = _ts(events[-1]["ts"]) + timedelta(hours=1)
    else:
        events, actor, at = list(synth.generate(n, seed)), synth.PROBE_ACTOR, synth.probe_time(n)
    return events, actor, at.strftime("%Y-%m-%dT%H:%M:%SZ")


def turn_events(
    events: list[dict[str, Any]], actor: dict[str, Any], turns: int, seed: int = 0
) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """The turns' events (5 asserts each, in the actor's own scope) after ``events``, and
    the 15 fixed facts to check."""
    tenant = actor["tenant"]
    last_of_key: dict[str, str] = {}
    facts: list[str] = []
    for event in events:
        if event["type"] == "assert" and event["tenant"] == tenant:
            last_of_key[event["key"]] = event["fact"]
            facts.append(event["fact"])
    rng = random.Random(seed)
    keys = sorted(last_of_key)
    checked = rng.sample(facts, min(CHECK_FIXED, len(facts)))
    last = _ts(events[-1]["ts"])
    out = []
    for turn in range(turns):
        stamp = (last + timedelta(seconds=turn + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        batch = []
        for i in range(REVISIONS + NEW_KEYS):
            fact = f"{tenant}-T{turn}.{i}"
            event: dict[str, Any] = {
                "id": f"turn{turn}.{i}", "ts": stamp, "actor": "agent-1", "tenant": tenant,
                "type": "assert", "fact": fact, "scope": actor.get("scope", "global"),
            }  # fmt: skip
            if i < REVISIONS:
                key = rng.choice(keys)
                event.update(supersedes=[last_of_key[key]], authority="executive")
            else:
                key = f"turn.{turn}.{i}"
                keys.append(key)
            event["key"] = key
            event["value"] = f"turn {turn} value {rng.randrange(10**6)} of {key}"
            last_of_key[key] = fact
            batch.append(event)
        out.append(batch)
    return out, checked


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


# -- Memgine's child ------------------------------------------------------------------------


def _stub_model_clients() -> None:
    """statebench's baselines import openai and anthropic, which Memgine never calls."""
    for name, attr in (("openai", "OpenAI"), ("anthropic", "Anthropic")):
        if name not in sys.modules:
            try:
                __import__(name)
            except ImportError:
                module = types.ModuleType(name)
                setattr(module, attr, type(attr, (), {}))
                sys.modules[name] = module


def _memgine_ingest(engine: Any, source_type: Any, event: dict[str, Any]) -> None:
    """One gamma ``assert`` as Memgine's ``ingest_fact``, as ``memgine.py`` does it."""
    authority = event.get("authority")
    source = source_type(
        type="system", identity=event["actor"],
        authority=authority if authority in _MEMGINE_AUTHORITIES else "peer",
    )  # fmt: skip
    supersedes = event.get("supersedes")
    engine.ingest_fact(
        fact_id=event["fact"], key=event["key"], value=str(event["value"]), source=source,
        ts=_ts(event["ts"]), supersedes=supersedes[0] if supersedes else None,
        depends_on=list(event.get("depends_on", ())),
    )  # fmt: skip


def run_memgine(n: int, turns: int, seed: int, budget: float, name: str) -> dict[str, Any]:
    _stub_model_clients()
    from statebench.memgine.engine import MemgineEngine  # installed beside gamma, not by it
    from statebench.schema.state import IdentityRole, Source

    events, actor, _ = workload(name, n, seed)
    plan, _ = turn_events(events, actor, turns, seed)
    tenant = actor["tenant"]
    t0 = time.perf_counter()
    engine = MemgineEngine()
    engine.ingest_identity(IdentityRole(user_name=actor["id"], authority="peer"))
    ingested = 0
    for event in events:
        if event["type"] == "assert" and event["tenant"] == tenant:
            _memgine_ingest(engine, Source, event)
            ingested += 1
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    engine.build_context(QUERY)
    first_ms = (time.perf_counter() - t1) * 1e3
    gc.collect()
    ingest_ms, build_ms, turn_ms = [], [], []
    began = CLOCK[0]()
    for batch in plan:
        a = CLOCK[0]()
        for event in batch:
            _memgine_ingest(engine, Source, event)
        b = CLOCK[0]()
        context = engine.build_context(QUERY)
        c = CLOCK[0]()
        ingest_ms.append((b - a) * 1e3)
        build_ms.append((c - b) * 1e3)
        turn_ms.append((c - a) * 1e3)
        if c - began > budget:
            break
    return {
        "engine": "memgine", "events": n, "facts_ingested": ingested, "load_s": round(load_s, 3),
        "first_build_context_ms": round(first_ms, 3), "turns": len(turn_ms),
        "ingest5_ms": _stats(ingest_ms), "build_context_ms": _stats(build_ms),
        "turn_ms": _stats(turn_ms), "context_chars": len(context.context),
        "last_fact_in_context": plan[len(turn_ms) - 1][-1]["fact"] in context.context,
    }  # fmt: skip


# -- gamma's child --------------------------------------------------------------------------


def _gamma_setup(
    n: int, turns: int, seed: int, name: str
) -> tuple[Any, list[str], list[list[str]], list[str], dict[str, Any], str]:
    """An engine holding the whole log; the log's lines, the turns' lines, the fixed facts,
    the actor, t."""
    import gamma  # the benchmark's subject, imported in the child only

    events, actor, at = workload(name, n, seed)
    plan, checked = turn_events(events, actor, turns, seed)
    engine = gamma.Engine()
    lines = [_dumps(e) for e in events]
    for start in range(0, len(lines), 10_000):
        engine.append(lines[start : start + 10_000])
    return engine, lines, [[_dumps(e) for e in batch] for batch in plan], checked, actor, at


def _gamma_turns(
    engine: Any, plan: list[list[str]], checked: list[str], actor: dict[str, Any], at: str,
    budget: float,
) -> dict[str, list[float]]:
    """The timed turn loop: append 5, resolve, render the context, check 20."""
    times: dict[str, list[float]] = {k: [] for k in ("append", "resolve", "render", "check")}
    times["turn"] = []
    began = CLOCK[0]()
    for batch in plan:
        facts = [json.loads(line)["fact"] for line in batch] + checked
        a = CLOCK[0]()
        engine.append(batch)
        b = CLOCK[0]()
        resolution = engine.resolve(actor, at)
        c = CLOCK[0]()
        resolution.render("context")
        d = CLOCK[0]()
        engine.check(actor, at, facts)
        e = CLOCK[0]()
        for name, ms in zip(("append", "resolve", "render", "check", "turn"),
                            (b - a, c - b, d - c, e - d, e - a)):  # fmt: skip
            times[name].append(ms * 1e3)
        if e - began > budget:
            break
    return times


def run_gamma(
    n: int, turns: int, seed: int, budget: float, pure_runs: int, name: str
) -> dict[str, Any]:
    import gamma

    t0 = time.perf_counter()
    engine, lines, plan, checked, actor, at = _gamma_setup(n, turns, seed, name)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    first = engine.resolve(actor, at)
    first.render("context")
    engine.check(actor, at, checked)
    first_ms = (time.perf_counter() - t1) * 1e3
    gc.collect()
    times = _gamma_turns(engine, plan, checked, actor, at, budget)
    # The pure path folds the log as the reader gives it (a ParsedLog): engine.events is a
    # plain tuple, which gamma.resolve would first re-validate event by event.
    taken = [line for batch in plan[: len(times["turn"])] for line in batch]
    events = gamma.parse_events(lines + taken, policy=engine.policy)
    pure_ms = []
    for _ in range(pure_runs):
        a = CLOCK[0]()
        pure = gamma.resolve(events, actor, at, engine.policy).render("context")
        pure_ms.append((CLOCK[0]() - a) * 1e3)
    context = engine.resolve(actor, at).render("context")
    turn, pure_turn = _stats(times["turn"]), _stats(pure_ms)
    no_check = _stats([t - c for t, c in zip(times["turn"], times["check"])])
    return {
        "engine": "gamma", "events": len(events), "load_s": round(load_s, 3),
        "first_call_ms": round(first_ms, 3), "turns": len(times["turn"]),
        **{f"{k}_ms": _stats(v) for k, v in times.items() if k != "turn"},
        "turn_ms": turn, "turn_without_check_ms": no_check, "pure_turn_ms": pure_turn,
        "pure_over_engine_p50": round(pure_turn["p50"] / no_check["p50"], 1),
        "context_chars": len(context), "engine_equals_pure": context == pure,
        "engine_events_match": len(engine.events) == len(events),
    }  # fmt: skip


def profile_gamma(n: int, turns: int, seed: int, top: int, name: str) -> str:
    """gamma's turn loop at ``n`` events under cProfile: the top functions, two orders."""
    engine, _, plan, checked, actor, at = _gamma_setup(n, turns, seed, name)
    first = engine.resolve(actor, at)
    first.render("context")
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    _gamma_turns(engine, plan, checked, actor, at, float("inf"))
    profiler.disable()
    out = io.StringIO()
    for order in ("tottime", "cumulative"):
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order).print_stats(top)
    return out.getvalue()


# -- the parent -----------------------------------------------------------------------------


def _child(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    before = os.getloadavg()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[2:5]} failed: {done.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["loadavg"] = {"before": before[0], "after": os.getloadavg()[0]}
    return result


def _median_of(runs: list[dict[str, Any]], field: str) -> dict[str, float]:
    return {q: round(statistics.median(r[field][q] for r in runs), 4) for q in ("p50", "p99")}


def summary(
    mem: list[dict[str, Any]], gam: list[dict[str, Any]], whole: dict[str, Any]
) -> dict[str, Any]:
    """One size's figures: medians over the rounds, and the ratios (also round by round)."""
    m_turn, g_turn = _median_of(mem, "turn_ms"), _median_of(gam, "turn_ms")
    g_pure = _median_of(gam, "pure_turn_ms")
    return {
        "memgine_turn_ms": m_turn,
        "memgine_ingest5_ms": _median_of(mem, "ingest5_ms"),
        "memgine_build_context_ms": _median_of(mem, "build_context_ms"),
        "gamma_turn_ms": g_turn,
        **{f"gamma_{s}_ms": _median_of(gam, f"{s}_ms")
           for s in ("append", "resolve", "render", "check", "turn_without_check")},
        "gamma_pure_turn_ms": g_pure,
        "speedup_per_turn_p50": round(m_turn["p50"] / g_turn["p50"], 1),
        "speedup_per_turn_p99": round(m_turn["p99"] / g_turn["p99"], 1),
        # each round's Memgine child against the gamma child run right after it
        "speedup_per_turn_p50_by_round": [
            round(m["turn_ms"]["p50"] / g["turn_ms"]["p50"], 1) for m, g in zip(mem, gam)
        ],
        "pure_over_engine_turn_p50": round(g_pure["p50"] / g_turn["p50"], 1),
        "speedup_whole_process_cpu": whole.get("speedup_cpu"),
        "turns": {"memgine": [r["turns"] for r in mem], "gamma": [r["turns"] for r in gam]},
        "engine_equals_pure": all(r["engine_equals_pure"] for r in gam),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternated children per engine")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds of turns a child")
    parser.add_argument("--pure-runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--whole-sizes", default="1000,10000,100000", help="memgine.py ('' none)")
    parser.add_argument("--whole-repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=None, help="profile gamma's turns at N")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default=None, help="write the JSON here (default stdout)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--workload", choices=("synth", "statebench"), default="synth",
                        help="the log: synth.py's (ours) or statebench_log.py's")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # engine:n
    args = parser.parse_args(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.profile is not None:
        sys.stdout.write(profile_gamma(args.profile, args.turns, args.seed, args.top,
                                       args.workload))
        return 0
    if args.child:
        name, n = args.child.split(":")
        if name == "memgine":
            result = run_memgine(int(n), args.turns, args.seed, args.budget, args.workload)
        else:
            result = run_gamma(int(n), args.turns, args.seed, args.budget, args.pure_runs,
                               args.workload)
        print(json.dumps(result))
        return 0

    sizes = [int(s) for s in args.sizes.split(",")]
    load_start = os.getloadavg()
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        cache = memgine._tiktoken_cache(Path(scratch) / "tiktoken")
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
        for _ in range(args.rounds):
            for n in sizes:
                for name in ("memgine", "gamma"):
                    child = [sys.executable, __file__, "--child", f"{name}:{n}",
                             "--turns", str(args.turns), "--seed", str(args.seed),
                             "--budget", str(args.budget),
                             "--pure-runs", str(args.pure_runs), "--clock", args.clock,
                             "--workload", args.workload]  # fmt: skip
                    runs.setdefault((name, n), []).append(_child(child, env))
                    print(json.dumps(runs[name, n][-1]), file=sys.stderr)
        whole = {}
        for n in (int(s) for s in args.whole_sizes.split(",") if s):
            path = Path(scratch) / f"whole{n}.json"
            memgine.main(["--events", str(n), "--repeat", str(args.whole_repeat),
                          "--seed", str(args.seed), "--out", str(path)])  # fmt: skip
            found = json.loads(path.read_text(encoding="utf-8"))
            kept = ("speedup_cpu", "speedup_wall", "speedup_in_process_work", "ceiling_cpu",
                    "memgine_facts_ingested", "loadavg")  # fmt: skip
            whole[str(n)] = {k: found[k] for k in kept} | {
                "gamma_cpu_s": found["gamma"]["cpu_s"],
                "memgine_cpu_s": found["memgine"]["cpu_s"],
            }
    per_size = {str(n): summary(runs["memgine", n], runs["gamma", n], whole.get(str(n), {}))
                for n in sizes}  # fmt: skip
    report = {
        "benchmark": "one more turn: Memgine ingest 5 + build_context vs gamma.Engine "
        "append 5 + resolve + render('context') + check 20",
        "statistic": f"per child p50/p99 over its turns ({args.clock} clock); median over "
        f"{args.rounds} alternated children per engine and size",
        "query": QUERY,
        "workload": args.workload,
        "per_size": per_size,
        "whole_process": whole,
        "runs": {f"{name}:{n}": r for (name, n), r in runs.items()},
        "loadavg": {"start": load_start, "end": os.getloadavg()},
        "python": platform.python_version(),
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
