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

Then, in the parent process and in the same run (``--whole-sizes``, default 100k and 1M;
``--whole-sizes ""`` skips it), whole processes on the same log file written by ``synth.py``,
alternated run by run: ``gamma -q resolve LOG --format json`` (output to /dev/null) against a
process that only reads the file and keeps ``json.loads`` of each line, with each child's
CPU time, wall time and peak RSS (``os.wait4``); bytes of peak RSS per event; the same
resolution from a store holding the same log (``--store-sizes``, default 100k); and the
start: ``import gamma`` by ``python -X importtime`` (cumulative µs) and ``gamma --version``.
``goals`` compares the figures with issue 12's.

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
import tempfile
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

    # Warm up first: the first parse and Γ in a process import what they use lazily (tens of
    # milliseconds, which would be a third of a 10k-event parse measured once).
    warm = gamma.parse_events(lines[:1000])
    gamma.resolve(warm, synth.PROBE_ACTOR, synth.probe_time(len(warm)))
    del warm

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


_JSON_ONLY = (
    "import json, sys\n"
    "loads = json.loads\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    data = f.read().decode('utf-8')\n"
    "kept = [loads(line) for line in data.split('\\n') if line]\n"
)


def _child(argv: list[str]) -> dict[str, float]:
    """Run one process to its end; its CPU, wall time and peak RSS from its own rusage."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {err.decode()[-500:]}")
    return {
        "wall_s": round(time.perf_counter() - start, 4),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 4) for key in runs[0]}


def _gamma_exe() -> str:
    found = Path(sys.executable).with_name("gamma")
    return str(found) if found.exists() else "gamma"


def whole_processes(
    sizes: list[int], store_sizes: list[int], seed: int, repeat: int, workdir: Path
) -> dict[str, Any]:
    """Whole ``gamma resolve`` processes against ``json.loads``-only ones, alternated."""
    gamma_exe = _gamma_exe()
    actor_file = workdir / "actor.json"
    actor_file.write_text(json.dumps(synth.PROBE_ACTOR), encoding="utf-8")
    out: dict[str, Any] = {"sizes": []}
    for n in sizes:
        log = workdir / f"synth-{n}-{seed}.jsonl"
        if not log.exists():  # in a child: a parent that grew would inflate every child's
            # ru_maxrss (a forked child starts at its parent's size)
            subprocess.run([sys.executable, str(HERE / "synth.py"), "--events", str(n),
                            "--seed", str(seed), "--out", str(log)], check=True)  # fmt: skip
        at = synth.probe_time(n).strftime("%Y-%m-%dT%H:%M:%SZ")
        resolve_argv = [gamma_exe, "-q", "resolve", "--actor", str(actor_file), "--at", at,
                        "--format", "json"]  # fmt: skip
        print(f"[bench] whole process, {n} events ...", file=sys.stderr, flush=True)
        row: dict[str, Any] = {"events": n, "loadavg_start": os.getloadavg()}
        runs: dict[str, list[dict[str, float]]] = {"json_loads": [], "gamma_file": []}
        with_store = n in store_sizes
        if with_store:
            store = workdir / f"synth-{n}-{seed}.db"
            if not store.exists():
                subprocess.run([gamma_exe, "-q", "init", str(store)], check=True, capture_output=True)
                subprocess.run([gamma_exe, "-q", "append", str(store), str(log)], check=True,
                               capture_output=True)  # fmt: skip
            runs["gamma_store"] = []
        for _ in range(repeat):  # alternated, so load drifts hit every kind alike
            runs["json_loads"].append(_child([sys.executable, "-c", _JSON_ONLY, str(log)]))
            runs["gamma_file"].append(_child([*resolve_argv[:3], str(log), *resolve_argv[3:]]))
            if with_store:
                runs["gamma_store"].append(_child([*resolve_argv[:3], str(store), *resolve_argv[3:]]))
        for name, kind_runs in runs.items():
            row[name] = {**_median(kind_runs), "runs": kind_runs}
        base = row["json_loads"]
        row["ratio_cpu_gamma_over_json_loads"] = round(row["gamma_file"]["cpu_s"] / base["cpu_s"], 3)
        row["ratio_wall_gamma_over_json_loads"] = round(
            row["gamma_file"]["wall_s"] / base["wall_s"], 3
        )
        row["gamma_bytes_per_event"] = round(row["gamma_file"]["peak_rss_mib"] * 2**20 / n)
        if with_store:
            row["ratio_cpu_store_over_file"] = round(
                row["gamma_store"]["cpu_s"] / row["gamma_file"]["cpu_s"], 3
            )
            row["ratio_wall_store_over_file"] = round(
                row["gamma_store"]["wall_s"] / row["gamma_file"]["wall_s"], 3
            )
        row["loadavg_end"] = os.getloadavg()
        out["sizes"].append(row)
        print(
            f"[bench] {n}: gamma {row['gamma_file']['cpu_s']} s CPU, json.loads"
            f" {base['cpu_s']} s, ratio {row['ratio_cpu_gamma_over_json_loads']},"
            f" peak {row['gamma_file']['peak_rss_mib']} MiB",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    out["start"] = start_times(gamma_exe, repeat=max(repeat, 5))
    return out


def start_times(gamma_exe: str, repeat: int) -> dict[str, Any]:
    """``import gamma`` (importtime's cumulative figure) and ``gamma --version`` (a process)."""
    imports = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import gamma"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        last = [line for line in done.stderr.splitlines() if line.rstrip().endswith("| gamma")]
        imports.append(int(last[-1].split("|")[1]))
    version = [_child([gamma_exe, "--version"]) for _ in range(repeat)]
    bare = [_child([sys.executable, "-c", "pass"]) for _ in range(repeat)]
    return {
        "import_gamma_ms": round(statistics.median(imports) / 1000, 2),
        "import_gamma_all_ms": [round(us / 1000, 2) for us in imports],
        "gamma_version": _median(version),
        "python_c_pass": _median(bare),
    }


GOALS = {
    "whole process at 1M: gamma / json.loads (CPU) <= 2": ("whole", 1_000_000, 2.0),
    "parse+validate / json.loads (in process) <= 1.5": ("parse", None, 1.5),
    "gamma / parse (in process) <= 1": ("gamma", None, 1.0),
    "growth exponent 10k -> 1M <= 1.05": ("exponent", None, 1.05),
    "import gamma <= 60 ms": ("import", None, 60.0),
    "store / file (whole process CPU) <= 1.2": ("store", None, 1.2),
    "peak RSS at 1M < 1536 MiB": ("rss", 1_000_000, 1536.0),
}


def goals(report: dict[str, Any]) -> dict[str, Any]:
    """Each goal of issue 12 with the figure this run measured (None: not measured)."""
    sizes = {r["events"]: r for r in report["sizes"]}
    whole = {r["events"]: r for r in report.get("whole", {}).get("sizes", [])}
    largest = sizes[max(sizes)] if sizes else None
    found: dict[str, Any] = {}
    for name, (kind, n, limit) in GOALS.items():
        value: float | None = None
        if kind == "whole" and n in whole:
            value = whole[n]["ratio_cpu_gamma_over_json_loads"]
        elif kind == "parse" and largest:
            value = largest["ratio_parse_over_json_loads"]
        elif kind == "gamma" and largest:
            value = largest["ratio_gamma_over_parse"]
        elif kind == "exponent" and len(sizes) > 1:
            small, large = min(sizes), max(sizes)
            t0 = sizes[small]["parse"]["median_s"] + sizes[small]["gamma"]["median_s"]
            t1 = sizes[large]["parse"]["median_s"] + sizes[large]["gamma"]["median_s"]
            value = round(math.log(t1 / t0) / math.log(large / small), 3)
        elif kind == "import" and "whole" in report:
            value = report["whole"]["start"]["import_gamma_ms"]
        elif kind == "store":
            stored = [r for r in whole.values() if "ratio_cpu_store_over_file" in r]
            value = stored[-1]["ratio_cpu_store_over_file"] if stored else None
        elif kind == "rss" and n in whole:
            value = whole[n]["gamma_file"]["peak_rss_mib"]
        met = None if value is None else (value < limit if kind == "rss" else value <= limit)
        found[name] = {"measured": value, "met": met}
    return found


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
    parser.add_argument(
        "--whole-sizes",
        default="100000,1000000",
        help="sizes measured as whole processes against a json.loads-only process ('' skips)",
    )
    parser.add_argument(
        "--store-sizes", default="100000", help="whole-process sizes also resolved from a store"
    )
    parser.add_argument("--whole-repeat", type=int, default=3, help="runs per whole process")
    parser.add_argument(
        "--workdir", default=None, help="where the logs and stores are kept (default a temp dir)"
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
    whole_sizes = [int(x.replace("_", "")) for x in args.whole_sizes.split(",") if x.strip()]
    if whole_sizes:
        store_sizes = [int(x.replace("_", "")) for x in args.store_sizes.split(",") if x.strip()]
        with tempfile.TemporaryDirectory() as scratch:
            workdir = Path(args.workdir or scratch)
            workdir.mkdir(parents=True, exist_ok=True)
            report["whole"] = whole_processes(
                whole_sizes, store_sizes, args.seed, args.whole_repeat, workdir
            )
    report["goals"] = goals(report)
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
