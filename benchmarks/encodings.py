"""Whole ``gamma resolve`` processes on one log written by four encoders, against a process
that only ``json.loads`` each line, and (with ``--baseline``) against another gamma checkout.

The log is ``synth.py``'s, re-encoded here line by line with Python's ``json`` module, not
gamma's writer: ``dumps`` defaults (``", "`` and ``": "``), compact ASCII, compact UTF-8, and
compact ``ensure_ascii`` escapes. Runs are alternated (baseline, current, floor, encoding by
encoding), each a fresh process whose CPU and wall time are read with ``os.wait4``. Every
encoding must give the same resolution bytes, and the baseline the same as the current tree
(the digest is printed). Each child's peak RSS (``ru_maxrss`` from ``os.wait4``; the parent
stays small, since Linux carries a parent's high-water mark into a child it forks) gives
``kb_per_event`` (bytes / 1000 / events, as issue 27 counts it). A script, not a test: pytest
does not collect it.

In process (``--rounds``, 0 to skip), per tree and encoding, a fresh child holds the file's
lines as text (as a library caller hands them in) and alternates ``json.loads`` of every line
with ``parse_events`` of them all (parse, validate, hash the chain and the tree), a
``gc.collect()`` before each, Python's default collector thresholds; CPU seconds
(``process_time``), the minimum and the median, and the ratio of the minima.

``--growth-from EARLIER.json`` (this script's output at another size) adds, per encoding, the
growth exponent k in t ~ n^k of the whole process's CPU seconds (and of the in-process
``parse_events`` minimum) between the two sizes. ``goals`` sets each figure beside issue 27's
(None: not measured in this run).

Usage::

    git worktree add /tmp/before HEAD
    python benchmarks/encodings.py --events 100000 --baseline /tmp/before --out enc.json
    python benchmarks/encodings.py --events 1000000 --repeat 1 --rounds 1 \
        --growth-from enc.json --out enc-1m.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ENCODERS = {
    "dumps_defaults": {},
    "compact_ascii": {"separators": (",", ":")},
    "compact_utf8": {"separators": (",", ":"), "ensure_ascii": False},
    "compact_escapes": {"separators": (",", ":"), "ensure_ascii": True},
}
#: Issue 27's goals: (figure, limit); every figure is met when at most its limit.
GOALS = {
    "whole process / json.loads (CPU), each encoding <= 2.5": 2.5,
    "slowest / fastest encoding (whole process CPU) <= 1.3": 1.3,
    "parse+validate / json.loads (in process, minima), each encoding <= 1.5": 1.5,
    "peak RSS per event (KB), each encoding <= 1.2": 1.2,
    "growth exponent of the whole process (CPU), each encoding <= 1.05": 1.05,
}
#: The encodings whose string values carry non-ASCII characters (written raw, or escaped).
ACCENTED = ("compact_utf8", "compact_escapes")
FLOOR = "import json,sys\nwith open(sys.argv[1],'rb') as f:\n    kept=[json.loads(x) for x in f]\n"
#: The in-process child: ``json.loads`` of every line against ``parse_events`` of them all,
#: alternated ``rounds`` times; prints the CPU seconds of each run as JSON.
IN_PROCESS = """
import gc, json, sys, time
from gamma import parse_events
path, rounds = sys.argv[1], int(sys.argv[2])
with open(path, encoding="utf-8") as f:
    lines = f.read().split("\\n")
while lines and not lines[-1]:
    lines.pop()
loads, clock = json.loads, time.process_time
runs = {"json_loads": [], "parse_events": []}
parse_events(lines[:1000])  # the first call's imports and caches, outside the clock
for _ in range(rounds):
    gc.collect()
    start = clock()
    kept = [loads(line) for line in lines]
    runs["json_loads"].append(clock() - start)
    del kept
    gc.collect()
    start = clock()
    kept = parse_events(lines)
    runs["parse_events"].append(clock() - start)
    del kept
print(json.dumps(runs))
"""


def encode(source: Path, target: Path, options: dict[str, Any], *, accents: bool) -> None:
    """``source``'s events re-encoded by ``json.dumps(**options)``; with ``accents`` every
    string value gains non-ASCII characters (a BMP letter and the euro sign)."""
    with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
        for line in lines:
            event = json.loads(line)
            if accents and isinstance(event.get("value"), str):
                event["value"] += " é€"
            out.write(json.dumps(event, **options) + "\n")


def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float, bytes]:
    """(wall s, CPU s, peak RSS MiB, stdout) of one child process, run in ``cwd``: ``python
    -m`` and ``-c`` put the working directory first on ``sys.path``, before ``PYTHONPATH``, so
    a child run from a checkout would import that checkout's gamma whatever tree it was
    given."""
    started = time.perf_counter()
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    out = child.stdout.read() if child.stdout is not None else b""
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{argv[:4]} exited with status {status}")
    rss_mib = usage.ru_maxrss / 1024  # Linux: KiB
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, rss_mib, out


def in_process(log: Path, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    """``parse_events`` against ``json.loads`` of the same lines, in one child process (run
    beside the log, for the reason ``run`` gives)."""
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(log), str(rounds)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=log.parent,
    )
    runs = json.loads(done.stdout)
    row: dict[str, Any] = {
        stage: {"min_cpu_s": min(times), "median_cpu_s": statistics.median(times)}
        for stage, times in runs.items()
    }
    row["ratio_min_to_json_loads"] = (
        row["parse_events"]["min_cpu_s"] / row["json_loads"]["min_cpu_s"]
    )
    return row


def growth(row: dict[str, Any], events: int, earlier: dict[str, Any], n0: int) -> dict[str, Any]:
    """The exponent k in t ~ n^k between an earlier run's row (``n0`` events) and this one."""

    def exponent(t0: float, t1: float) -> float:
        return round(math.log(t1 / t0) / math.log(events / n0), 3)

    found: dict[str, Any] = {"from": n0, "to": events}
    for label in ("current", "json_loads"):
        if label in row and label in earlier:
            found[f"{label}_cpu"] = exponent(earlier[label]["cpu_s"], row[label]["cpu_s"])
    for label, stages in row.get("in_process", {}).items():
        before = earlier.get("in_process", {}).get(label)
        if before:
            found[f"in_process_{label}_parse_events"] = exponent(
                before["parse_events"]["min_cpu_s"], stages["parse_events"]["min_cpu_s"]
            )
    return found


def goals(result: dict[str, Any]) -> dict[str, Any]:
    """Each of issue 27's reading goals with this run's worst figure over the encodings."""
    rows = result["encodings"].values()
    worst: dict[str, float | None] = {
        "whole": max(r["ratio_cpu_to_json_loads"]["current"] for r in rows),
        "slowest": result["current_slowest_over_fastest_encoding"],
        "parse": max(
            (
                r["in_process"]["current"]["ratio_min_to_json_loads"]
                for r in rows
                if "in_process" in r
            ),
            default=None,
        ),
        "kb": max(r["current"]["kb_per_event"] for r in rows),
        "growth": max((r["growth"]["current_cpu"] for r in rows if "growth" in r), default=None),
    }
    found = {}
    for (name, limit), value in zip(GOALS.items(), worst.values(), strict=True):
        found[name] = {"measured": value, "met": None if value is None else value <= limit}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="another gamma checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="in-process rounds (0: none)")
    parser.add_argument(
        "--growth-from",
        default=None,
        help="this script's JSON at another size: adds growth exponents",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gamma-enc-"))
    synth = work / "synth.jsonl"
    subprocess.run(
        [sys.executable, str(HERE / "synth.py"), "--events", str(args.events), "--out", str(synth)],
        check=True,
    )
    sys.path.insert(0, str(HERE))
    from synth import PROBE_ACTOR, probe_time  # the generator's own actor and time

    actor = json.dumps(PROBE_ACTOR)
    at = probe_time(args.events).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {**os.environ, "GAMMA_LOG_LEVEL": "off"}
    trees = {"current": str(HERE.parent)}
    if args.baseline:
        trees["baseline"] = str(Path(args.baseline).resolve())
    result: dict[str, Any] = {
        "events": args.events,
        "repeat": args.repeat,
        "encodings": {},
        "loadavg_start": os.getloadavg(),
    }
    earlier = json.loads(Path(args.growth_from).read_text()) if args.growth_from else None
    if earlier is not None and earlier["events"] == args.events:
        raise SystemExit("--growth-from needs a run at another size than --events")
    for name, options in ENCODERS.items():
        log = work / f"{name}.jsonl"
        encode(synth, log, options, accents=name in ACCENTED)
        times: dict[str, list[tuple[float, float, float]]] = {k: [] for k in [*trees, "json_loads"]}
        outputs: dict[str, bytes] = {}
        for label, tree in trees.items():  # each run imports the tree it was given
            _, _, _, found = run(
                [sys.executable, "-c", "import gamma; print(gamma.__file__)"],
                {**env, "PYTHONPATH": tree},
                work,
            )
            if not found.decode().strip().startswith(tree):
                raise SystemExit(f"{label} imports {found.decode().strip()}, not {tree}")
        for _ in range(args.repeat):
            for label, tree in trees.items():
                wall, cpu, rss, out = run(
                    [
                        sys.executable,
                        "-m",
                        "gamma",
                        "-q",
                        "resolve",
                        str(log),
                        "--actor",
                        actor,
                        "--at",
                        at,
                        "--format",
                        "json",
                    ],
                    {**env, "PYTHONPATH": tree},
                    work,
                )
                times[label].append((wall, cpu, rss))
                outputs[label] = out
            wall, cpu, rss, _ = run([sys.executable, "-c", FLOOR, str(log)], env, work)
            times["json_loads"].append((wall, cpu, rss))
        digest = json.loads(outputs["current"])["digest"]
        same = {label: json.loads(out)["digest"] == digest for label, out in outputs.items()}
        row: dict[str, Any] = {"bytes": log.stat().st_size, "digest": digest, "same_digest": same}
        for label, runs in times.items():
            peak = max(r for _, _, r in runs)
            row[label] = {
                "wall_s": statistics.median(w for w, _, _ in runs),
                "cpu_s": statistics.median(c for _, c, _ in runs),
                "cpu_s_runs": [c for _, c, _ in runs],
                "peak_rss_mib": round(peak, 1),
                "kb_per_event": round(peak * 2**20 / 1000 / args.events, 3),
            }
        floor = row["json_loads"]["cpu_s"]
        row["ratio_cpu_to_json_loads"] = {k: row[k]["cpu_s"] / floor for k in trees}
        row["ratio_wall_to_json_loads"] = {
            k: row[k]["wall_s"] / row["json_loads"]["wall_s"] for k in trees
        }
        if "baseline" in trees:
            row["current_over_baseline_cpu"] = row["current"]["cpu_s"] / row["baseline"]["cpu_s"]
        if args.rounds:
            row["in_process"] = {
                label: in_process(log, args.rounds, {**env, "PYTHONPATH": tree})
                for label, tree in trees.items()
            }
        if earlier and name in earlier["encodings"]:
            row["growth"] = growth(row, args.events, earlier["encodings"][name], earlier["events"])
        result["encodings"][name] = row
        print(f"[encodings] {name}: {row['ratio_cpu_to_json_loads']}", file=sys.stderr, flush=True)
    rows = result["encodings"]
    ratios = {name: row["ratio_cpu_to_json_loads"]["current"] for name, row in rows.items()}
    result["current_slowest_over_fastest_encoding"] = max(ratios.values()) / min(ratios.values())
    result["same_resolution_per_content"] = {  # the same events, however they were written
        "ascii_values": rows["dumps_defaults"]["digest"] == rows["compact_ascii"]["digest"],
        "accented_values": rows["compact_utf8"]["digest"] == rows["compact_escapes"]["digest"],
    }
    result["goals"] = goals(result)
    result["loadavg_end"] = os.getloadavg()
    result["parent_peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
