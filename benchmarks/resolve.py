"""Benchmark Γ against the cost of parsing the same log.

For synthetic logs (``benchmarks/synth.py``) of each size this measures, in
one fresh process per size:

* ``json_loads``: plain ``json.loads`` of every line, the floor of any parser;
* ``parse``: ``gamma.parse_events`` over the same lines (gamma's own parse and
  whole-log validation), lines already in memory;
* ``gamma``: ``gamma.resolve`` on the already-parsed events, for one actor
  (``synth.PROBE_ACTOR``) at a probe time after the last event, the chain
  head computed by resolve itself (``head=None``) and the resolution's digest
  included, as the CLI does; parsing excluded.

Each measurement runs ``--repeat`` times (fewer when the runs so far took more
than ``--budget`` seconds; ``runs`` says how many) after a ``gc.collect()``,
with the garbage collector left on as in normal use. ``median`` (wall clock,
``perf_counter``) is the headline; ``min`` and the median CPU time
(``process_time``, less sensitive to other load on the machine) are given
too, and the load average before and after each size. Peak RSS is ``getrusage(RUSAGE_SELF).ru_maxrss``
of the per-size process, read after each phase.

Usage::

    python benchmarks/resolve.py                      # 10k, 100k, 1M events
    python benchmarks/resolve.py --sizes 1000,10000 --repeat 3 --out bench.json

This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__test__ = False  # never a pytest module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)


def _peak_rss_mib() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":
        peak //= 1024
    return round(peak / 1024, 1)


def _measure(fn: Callable[[], Any], repeat: int, budget: float) -> tuple[dict[str, Any], Any]:
    """Run ``fn`` up to ``repeat`` times; return timing stats and the last result."""
    times: list[float] = []
    cpu: list[float] = []
    result: Any = None
    for _ in range(repeat):
        result = None  # let the previous result go before the next run
        gc.collect()
        start_cpu = time.process_time()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if sum(times) > budget:
            break
    stats = {
        "runs": len(times),
        "median_s": round(statistics.median(times), 6),
        "min_s": round(min(times), 6),
        "max_s": round(max(times), 6),
        "all_s": [round(t, 6) for t in times],
        "cpu_median_s": round(statistics.median(cpu), 6),
    }
    return stats, result


def _rates(stats: dict[str, Any], n: int) -> dict[str, Any]:
    median = stats["median_s"]
    return {
        **stats,
        "events_per_s": round(n / median, 1),
        "events_per_s_best": round(n / stats["min_s"], 1),
        "s_per_event": median / n,
        "events_per_s_cpu": round(n / stats["cpu_median_s"], 1) if stats["cpu_median_s"] else None,
    }


def run_size(n: int, seed: int, repeat: int, budget: float) -> dict[str, Any]:
    """All measurements for one size, in this process."""
    import gamma

    out: dict[str, Any] = {"events": n, "seed": seed, "loadavg_start": os.getloadavg()}
    rss: dict[str, float] = {"start": _peak_rss_mib()}

    start = time.perf_counter()
    lines = list(synth.lines(n, seed))
    out["generate_s"] = round(time.perf_counter() - start, 3)
    out["log_bytes"] = sum(len(line.encode("utf-8")) + 1 for line in lines)
    rss["after_generate"] = _peak_rss_mib()

    loads = json.loads
    stats, _ = _measure(lambda: [loads(line) for line in lines], repeat, budget)
    out["json_loads"] = _rates(stats, n)
    rss["after_json_loads"] = _peak_rss_mib()

    stats, events = _measure(lambda: gamma.parse_events(lines), repeat, budget)
    out["parse"] = _rates(stats, n)
    rss["after_parse"] = _peak_rss_mib()
    assert len(events) == n

    actor = synth.PROBE_ACTOR
    at = synth.probe_time(n)
    digests: set[str] = set()

    def gamma_once() -> Any:
        resolution = gamma.resolve(events, actor, at)
        digests.add(resolution.digest)
        return resolution

    stats, resolution = _measure(gamma_once, repeat, budget)
    out["gamma"] = _rates(stats, n)
    rss["after_gamma"] = _peak_rss_mib()

    out["ratio_gamma_over_parse"] = round(out["gamma"]["median_s"] / out["parse"]["median_s"], 3)
    out["ratio_parse_over_json_loads"] = round(
        out["parse"]["median_s"] / out["json_loads"]["median_s"], 3
    )
    out["ratio_gamma_over_json_loads"] = round(
        out["gamma"]["median_s"] / out["json_loads"]["median_s"], 3
    )
    codes = Counter(reason.code for item in resolution.excluded for reason in item.reasons)
    out["resolution"] = {
        "actor": actor,
        "at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "digest": resolution.digest,
        "deterministic": len(digests) == 1,
        "admitted": len(resolution.admitted),
        "excluded": len(resolution.excluded),
        "reason_codes": dict(sorted(codes.items())),
        "ignored": len(resolution.ignored),
        "verdicts": dict(sorted(Counter(x.verdict for x in resolution.experiences).items())),
        "event_types": dict(sorted(Counter(e.TYPE for e in events).items())),
    }
    rss["peak"] = _peak_rss_mib()
    out["loadavg_end"] = os.getloadavg()
    out["peak_rss_mib"] = rss
    return out


def _git_commit() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], check=False, cwd=HERE, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _environment() -> dict[str, Any]:
    import gamma

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    mem_total = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    mem_total = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "nproc": affinity,
        "cpu_count": os.cpu_count(),
        "mem_total_gib": mem_total,
        "gamma": gamma.__version__,
        "git": _git_commit(),
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _growth(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per event at each size and the empirical exponent k in t ~ n^k between sizes."""
    growth: dict[str, Any] = {}
    for name in ("json_loads", "parse", "gamma"):
        rows = []
        for small, large in itertools.pairwise(results):
            t0, t1 = small[name]["median_s"], large[name]["median_s"]
            n0, n1 = small["events"], large["events"]
            rows.append(
                {
                    "from": n0,
                    "to": n1,
                    "s_per_event_ratio": round((t1 / n1) / (t0 / n0), 3),
                    "exponent": round(math.log(t1 / t0) / math.log(n1 / n0), 3),
                }
            )
        growth[name] = {
            "s_per_event": {str(r["events"]): r[name]["s_per_event"] for r in results},
            "steps": rows,
        }
    return growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark gamma.resolve against parsing.")
    parser.add_argument(
        "--sizes",
        default=",".join(str(n) for n in DEFAULT_SIZES),
        help="comma-separated event counts (default 10000,100000,1000000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (default 3)")
    parser.add_argument(
        "--budget",
        type=float,
        default=600.0,
        help="stop repeating a measurement once its runs took this many seconds (default 600)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the JSON here (default stdout)")
    parser.add_argument(
        "--cli-gc",
        action="store_true",
        help="collect garbage as the gamma command does (gc.set_threshold(100_000, 50, 100))"
        " instead of with Python's defaults, as a library caller gets",
    )
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker is not None:  # one size, in a fresh process, JSON on stdout
        if args.cli_gc:
            gc.set_threshold(100_000, 50, 100)
        result = run_size(args.worker, args.seed, args.repeat, args.budget)
        json.dump(result, sys.stdout)
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    report: dict[str, Any] = {
        "benchmark": "gamma.resolve vs gamma.parse_events vs json.loads",
        "statistic": (
            f"median wall time of up to {args.repeat} runs (min and median CPU time also"
            " given), gc on, gc.collect() before each run"
        ),
        "gc": "the gamma command's thresholds (100000, 50, 100)" if args.cli_gc else "Python defaults",
        "command": " ".join(
            ["python", "benchmarks/resolve.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "environment": _environment(),
        "sizes": [],
    }
    for n in sizes:
        print(f"[bench] {n} events ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                str(n),
                "--seed",
                str(args.seed),
                "--repeat",
                str(args.repeat),
                "--budget",
                str(args.budget),
                *(["--cli-gc"] if args.cli_gc else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        report["sizes"].append(result)
        print(
            f"[bench] {n}: gamma {result['gamma']['events_per_s']:,.0f} ev/s, "
            f"parse {result['parse']['events_per_s']:,.0f} ev/s, "
            f"json.loads {result['json_loads']['events_per_s']:,.0f} ev/s, "
            f"gamma/parse {result['ratio_gamma_over_parse']}, "
            f"peak RSS {result['peak_rss_mib']['peak']} MiB "
            f"({time.perf_counter() - start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    if len(report["sizes"]) > 1:
        report["growth"] = _growth(report["sizes"])
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
