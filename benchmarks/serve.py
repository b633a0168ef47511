"""Benchmark ``gamma serve`` against issue 31's goals: a real server process, real HTTP clients.

Builds a store of ``--events`` events across ``--tenants`` tenants (the many-tenant log of
``benchmarks/tenants.py``, written by a child process through ``gamma.Store``; its build time
is measured), writes a callers file (one bearer token per probe tenant's actor, a writer in
the first tenant), starts ``python -m gamma serve STORE --callers FILE --port P``, waits for
``/readyz`` and measures with httpx async clients over keep-alive connections:

* ``single``: ``POST /access/v1/evaluation``, one client, p50/p99 over ``--single`` requests;
* ``concurrent``: the same from ``--clients`` clients at once (one caller of its own tenant
  each), and ``GET /healthz`` at the same concurrency (the server's floor); p99 beyond the
  floor, throughput, and requests per second of server CPU (``/proc/PID/stat`` over the
  window, the server and its child processes);
* ``batch``: ``POST /access/v1/evaluations`` of ``--batch-size`` evaluations, p50/p99;
* ``watch``: ``GET /v1/watch?since=TOKEN`` as the first tenant's actor while another caller
  of that tenant appends ``--watch-appends`` facts through ``POST /v1/append``: time from
  each append's response to the change arriving on the stream;
* ``rss``: the server's RSS sampled every ``--rss-interval`` seconds for ``--duration``
  seconds of load (``--rss-clients`` clients, evaluations with a batch every tenth request):
  first, last, max and the least-squares slope after the first tenth of the run.

The client (``--client``): ``wrk`` (a C load generator, HdrHistogram percentiles; Debian's
``wrk`` 4.1) when it is installed, else httpx. wrk runs the floor, single, concurrent and
batch parts for ``--wrk-seconds`` per window from a Lua script written for the part (each
request pre-formatted with its body and bearer header, the callers and facts taken in turn;
``response`` counts every status outside 2xx and ``done`` prints the percentiles as JSON;
any non-2xx or socket error fails the part): its own round trip is ~0.05 ms where httpx's
is 2-5 ms on these cores, so what it measures is the server. With wrk the 64 clients are 64
connections whose requests take the probe callers in turn (wrk has no per-connection
header), not one caller per connection. The watcher and the RSS run stay httpx's. Every
part says which client measured it (``client``).

Beside the client's latencies, ``server_side_ms`` estimates the app's own from the server's
``/metrics`` histogram. A response other than 200 (an endpoint the server does not serve yet,
a refusal) stops its part with the endpoint, status and body, and the run exits 1: no
figure is ever made up. The JSON gives the machine, the load average around each part, the
command, and ``goals``: each goal of the issue beside the figure measured and whether it is
met (``at_issue_scale``: the run had 1M events across 1,000 tenants and 10 minutes of RSS).

    python benchmarks/serve.py --events 20000 --tenants 50 --duration 10 --out s.json  # quick
    python benchmarks/serve.py --workdir /tmp/serve-1m --duration 600 --out serve.json  # issue
    python benchmarks/serve.py --workdir W --client httpx ...  # the httpx clients, as before
    git worktree add /tmp/head HEAD  # before and after in one run: two servers, windows interleaved
    python benchmarks/serve.py --workdir W --compare-path /tmp/head ...

The client shares the machine with the server: its CPU time is reported beside each part.
This is a script, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import multiprocessing
import os
import resource
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__test__ = False  # never a pytest module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402  (extra serve/test; the clients)
import tenants  # noqa: E402  (the many-tenant log, as benchmarks/review.py uses at 1M)
from resolve import _environment  # noqa: E402  (machine, Python, gamma, git commit)

from gamma.serve.identity import new_token  # noqa: E402  (a bearer token and its sha256)

EVALUATION = "/access/v1/evaluation"
EVALUATIONS = "/access/v1/evaluations"
FACTS_PER_TENANT = 64  # request targets per probe tenant, spread over its facts
GOALS = {  # issue 31: name -> (figure path in the report, limit)
    "single evaluation p50 <= 1 ms (one client)": (("single", "latency_ms", "p50"), 1.0),
    "single evaluation p99 <= 5 ms (one client)": (("single", "latency_ms", "p99"), 5.0),
    "64 clients: p99 beyond the floor <= 5 ms": (("concurrent", "p99_beyond_floor_ms"), 5.0),
    "batch of 100 evaluations p99 <= 10 ms": (("batch", "latency_ms", "p99"), 10.0),
    "RSS flat over the run": (("rss", "growth_fitted_mib"), None),
    "watcher sees a change within 50 ms of its append (p99)": (("watch", "latency_ms", "p99"), 50.0),
}  # fmt: skip


class BenchError(Exception):
    """The server refused or lacks what the benchmark measures: stop, with what it said."""


# --- the store and the callers ------------------------------------------------------------


def _build(store: str, n: int, tenant_count: int, probes: int, seed: int) -> None:
    """In a child process (so the parent never holds the log): write the store and, beside
    it, the probe tenants' actors and facts and the build's time."""
    import gamma  # the benchmark's subject

    started, load = time.perf_counter(), _loadavg()
    lines, actors = tenants.log(n, tenant_count, tenant_count, seed)
    generated = time.perf_counter()
    names = [a["tenant"] for a in actors[:probes]]
    facts: dict[str, list[str]] = {t: [] for t in names}
    latest: dict[str, dict[tuple[str, str], str]] = {t: {} for t in names}  # likely admitted
    for line in lines:
        event = json.loads(line)
        if event["type"] == "assert" and event["tenant"] in facts:
            facts[event["tenant"]].append(event["fact"])
            latest[event["tenant"]][event["key"], event.get("scope", "global")] = event["fact"]
    with gamma.Store.init(store) as writer:
        for start in range(0, len(lines), 10_000):
            writer.append(lines[start : start + 10_000])
    meta = {
        "events": n, "tenants": tenant_count, "seed": seed,
        "generate_s": round(generated - started, 1),
        "store_build_s": round(time.perf_counter() - generated, 1),
        "store_mib": round(os.path.getsize(store) / 2**20, 1),
        "loadavg_before": load, "loadavg_after": _loadavg(),
        "actors": actors[:probes],
        "facts": {t: _targets(f, latest[t]) for t, f in facts.items()},
        "tenant_asserts": {t: len(f) for t, f in facts.items()},
    }  # fmt: skip
    Path(store + ".bench.json").write_text(json.dumps(meta))


def _targets(facts: list[str], latest: dict[tuple[str, str], str]) -> list[str]:
    """A tenant's request targets: the last assert of each key and scope (the ones most
    likely admitted: the generator supersedes by key) and others spread over the log."""
    last = [latest[k] for k in sorted(latest)][: FACTS_PER_TENANT // 2]
    chosen = set(last)
    rest = [f for f in facts if f not in chosen]
    k = FACTS_PER_TENANT - len(last)
    return last + (rest if len(rest) <= k else [rest[i * len(rest) // k] for i in range(k)])


def store_for(work: Path, n: int, tenant_count: int, probes: int, seed: int, *,
              copy: bool = True) -> tuple[Path, dict[str, Any]]:  # fmt: skip
    """The pristine store for ``(n, tenants, seed)`` in ``work`` (built unless already there),
    copied to the run's store: the run appends and the server writes a decision log beside it."""
    pristine = work / f"store-{n}-{tenant_count}-{seed}-{probes}.db"
    meta_path = Path(str(pristine) + ".bench.json")
    reused = meta_path.exists()
    if not reused:
        pristine.unlink(missing_ok=True)
        child = multiprocessing.get_context("spawn").Process(
            target=_build, args=(str(pristine), n, tenant_count, probes, seed)
        )
        child.start()
        child.join()
        if child.exitcode != 0:
            raise BenchError(f"building the store failed (exit {child.exitcode})")
    meta = json.loads(meta_path.read_text())
    meta["reused"] = reused
    run = work / "run.db"
    if not copy:
        return pristine, meta
    for stale in work.glob("run.db*"):
        stale.unlink()
    shutil.copyfile(pristine, run)
    return run, meta


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string of ASCII text is a TOML basic string
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"


def write_callers(path: Path, actors: list[dict[str, Any]]) -> tuple[dict[str, str], str, str]:
    """One caller per probe actor, a writer in the first tenant and an auditor that scrapes
    ``/metrics`` (auditors only; never used for the decisions timed, which it would see
    differently); the probes' tokens by actor id (the secrets stay in this process), the
    writer's and the scraper's."""
    tokens: dict[str, str] = {}
    blocks = []
    writer = {"id": f"{actors[0]['tenant']}-bench-writer", "tenant": actors[0]["tenant"]}
    scraper = {"id": f"{actors[0]['tenant']}-bench-scraper", "tenant": actors[0]["tenant"]}
    for actor in [*actors, writer, scraper]:
        secret, digest = new_token()
        tokens[actor["id"]] = secret
        auditor = "true" if actor is scraper else "false"
        blocks.append(
            f'[[caller]]\nname = {_toml("bench-" + actor["id"])}\ntoken_sha256 = "{digest}"\n'
            f"auditor = {auditor}\nactor = {_toml(actor)}\n"
        )
    path.write_text("\n".join(blocks), encoding="utf-8")
    return tokens, tokens.pop(writer["id"]), tokens.pop(scraper["id"])


# --- the server process -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m gamma serve`` as a child process; its CPU time and RSS from /proc."""

    def __init__(self, store: Path, callers: Path, work: Path, extra: list[str],
                 path: str | None = None) -> None:  # fmt: skip
        self.port = _free_port()
        self.env = dict(os.environ)
        if path:  # another checkout's gamma (a worktree of HEAD, for before and after)
            self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, self.env.get("PYTHONPATH")]))
        self.base = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "gamma", "serve", str(store), "--callers", str(callers),
                     "--port", str(self.port), *extra]  # fmt: skip
        self.log = work / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.scraper = ""  # an auditor's token: /metrics is the auditors'

    def start(self, timeout: float) -> float:
        """Start the server and wait for ``/readyz`` (200); seconds until it was ready."""
        t0 = time.perf_counter()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        with httpx.Client(base_url=self.base, trust_env=False, timeout=5) as client:
            while time.perf_counter() - t0 < timeout:
                if self.proc.poll() is not None:
                    raise BenchError(f"the server exited ({self.proc.returncode}):\n{self.tail()}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return time.perf_counter() - t0
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise BenchError(f"/readyz not 200 after {timeout} s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: graceful shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def pids(self) -> list[int]:
        """The server and its descendants (workers), by /proc's children lists."""
        assert self.proc is not None
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                todo.extend(int(x) for x in task.read_text().split())
        return found

    def cpu_s(self) -> float:
        total = 0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        return total / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        kib = 0
        for pid in self.pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kib += int(line.split()[1])
        return kib / 1024


# --- the clients ------------------------------------------------------------------------


def _client(base: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base, trust_env=False, timeout=60,
        headers={"Authorization": f"Bearer {token}"},
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    )  # fmt: skip


def _checked(response: httpx.Response) -> httpx.Response:
    if response.status_code != 200:
        what = f"{response.request.method} {response.request.url.path}"
        if response.status_code in (404, 405):
            raise BenchError(f"the server does not serve {what} ({response.status_code})")
        raise BenchError(f"{what}: {response.status_code} {response.text[:500]}")
    return response


def evaluation_body(actor: dict[str, Any], fact: str) -> dict[str, Any]:
    """An AuthZEN 1.0 evaluation: may this actor rely on this fact now (the server's clock)."""
    return {"subject": {"type": "actor", "id": actor["id"]}, "resource": {"type": "fact", "id": fact},
            "action": {"name": "rely"}}  # fmt: skip


def evaluations_body(actor: dict[str, Any], facts: list[str]) -> dict[str, Any]:
    """An AuthZEN 1.0 batch: the subject and action once, one resource per evaluation."""
    return {"subject": {"type": "actor", "id": actor["id"]}, "action": {"name": "rely"},
            "evaluations": [{"resource": {"type": "fact", "id": f}} for f in facts]}  # fmt: skip


Call = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]


def _percentiles(ms: list[float]) -> dict[str, Any]:
    ordered = sorted(ms)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)

    return {"p50": round(statistics.median(ordered), 3), "p90": at(0.9), "p99": at(0.99),
            "max": round(ordered[-1], 3), "n": len(ordered)}  # fmt: skip


Way = tuple[str, list[Call]]  # the route (the server's metrics label) and a call per client


async def closed_loop(server: Server, clients: list[httpx.AsyncClient], ways: dict[str, Way],
                      each: int, *, warmup: int, rounds: int) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per way (one call per client), every client sends its next request when its last one
    is answered; the ways alternate ``rounds`` times (the machine is shared: drift in its
    load falls on each way alike). Latency, wall time, server and client CPU per way, and
    the server's own latency of the route from its ``/metrics`` histogram over the windows.

    The client's garbage collector is off inside a window: its pauses are not the server's.
    """

    async def run(calls: list[Call], k: int, count: int, out: list[float] | None) -> None:
        client, call = clients[k], calls[k]
        for i in range(count):
            a = time.perf_counter()
            response = await call(client, i)
            b = time.perf_counter()
            _checked(response)
            if out is not None:
                out.append((b - a) * 1e3)

    load = _loadavg()
    single = len(server.pids()) == 1  # several workers: /metrics answers from one of them
    async with _client(server.base, server.scraper) as scraper:
        return await _windows(server, clients, ways, each, warmup, rounds, run, scraper, single, load)


async def _windows(server: Server, clients: list[httpx.AsyncClient], ways: dict[str, Way], each: int,
                   warmup: int, rounds: int, run: Any, scraper: httpx.AsyncClient, single: bool,
                   load: Any) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The measured windows of ``closed_loop``, the histogram read by the auditor ``scraper``."""
    sums: dict[str, dict[str, Any]] = {
        name: {"ms": [], "wall": 0.0, "cpu": 0.0, "mine": 0.0, "buckets": {}} for name in ways
    }
    for _, calls in ways.values():
        await asyncio.gather(*(run(calls, k, warmup, None) for k in range(len(clients))))
    for r in range(rounds):
        for name, (route, calls) in ways.items():
            count = each // rounds + (r < each % rounds)
            row = sums[name]
            before = await _histogram(scraper, route) if single else {}
            gc.collect()
            gc.disable()
            cpu0, mine0, t0 = server.cpu_s(), time.process_time(), time.perf_counter()
            await asyncio.gather(*(run(calls, k, count, row["ms"]) for k in range(len(clients))))
            row["wall"] += time.perf_counter() - t0
            row["cpu"] += server.cpu_s() - cpu0
            row["mine"] += time.process_time() - mine0
            gc.enable()
            for le, c in (await _histogram(scraper, route) if single else {}).items():
                row["buckets"][le] = row["buckets"].get(le, 0) + c - before.get(le, 0)
    out = {}
    for name, row in sums.items():
        n, wall, cpu = len(row["ms"]), row["wall"], row["cpu"]
        out[name] = {
            "client": "httpx", "clients": len(clients), "latency_ms": _percentiles(row["ms"]),
            "wall_s": round(wall, 2),
            "server_side_ms": _quantiles(row["buckets"]) if single else None,
            "requests_per_s": round(n / wall, 1), "server_cpu_s": round(cpu, 2),
            "requests_per_server_cpu_s": round(n / cpu, 1) if cpu else None,
            "server_cpu_us_per_request": round(cpu / n * 1e6, 1) if n else None,
            "client_cpu_s": round(row["mine"], 2), "loadavg_before": load, "loadavg_after": _loadavg(),
        }  # fmt: skip
    return out


async def _histogram(client: httpx.AsyncClient, route: str) -> dict[float, float]:
    """The server's cumulative latency buckets of ``route`` (seconds -> count) from /metrics."""
    text = _checked(await client.get("/metrics")).text
    out = {}
    for line in text.splitlines():
        if line.startswith("gamma_serve_request_seconds_bucket{") and f'route="{route}"' in line:
            labels, value = line.rsplit(" ", 1)
            le = labels.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = float(value)
    if not out:
        raise BenchError(f"/metrics has no gamma_serve_request_seconds buckets of {route}")
    return out


def _quantiles(buckets: dict[float, float]) -> dict[str, Any]:
    """p50 and p99 in ms from cumulative buckets, interpolated within a bucket (as Prometheus'
    histogram_quantile does): the server's time from the request's arrival in the app to
    its response, without the client, the HTTP parser or the wait for the event loop."""
    bounds, inf = sorted(buckets), float("inf")
    total = buckets[bounds[-1]] if bounds else 0
    out: dict[str, Any] = {"n": int(total)}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        rank, low, below, value = q * total, 0.0, 0.0, None
        for le in bounds:
            if buckets[le] >= rank and total:
                value = le if le == inf else low + (le - low) * (rank - below) / max(buckets[le] - below, 1)
                break
            low, below = le, buckets[le]
        out[name] = None if value is None else f">{low * 1e3:g}" if value == inf else round(value * 1e3, 3)
    return out  # fmt: skip


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _decisions(responses: list[dict[str, Any]]) -> dict[str, int]:
    return {"permitted": sum(r["decision"] is True for r in responses),
            "denied": sum(r["decision"] is False for r in responses)}  # fmt: skip


def _healthz(client: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
    """The empty request: the floor of the server, the HTTP stack and the client."""
    return client.get("/healthz")


#: the empty request, for wrk
HEALTHZ: tuple[str, str, str, str] = ("GET", "/healthz", "", "")


def _beyond(measured: dict[str, Any], floor: dict[str, Any]) -> dict[str, float]:
    """Latency percentiles beyond the floor's (the empty request at the same concurrency)."""
    return {f"{q}_beyond_floor_ms": round(measured["latency_ms"][q] - floor["latency_ms"][q], 3)
            for q in ("p50", "p99")}  # fmt: skip


# --- wrk ----------------------------------------------------------------------------------

#: One request of a wrk script: method, path, bearer token ("" for none) and JSON body ("" for none).
Spec = tuple[str, str, str, str]

_WRK_LUA = """
-- written by benchmarks/serve.py: the requests in turn; every non-2xx counted; JSON at the end
local specs = {%(specs)s}
local reqs = {}
local n = 0
errors = 0
bad = ""
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for k, s in ipairs(specs) do
    local headers = {}
    if s[3] ~= "" then headers["Authorization"] = "Bearer " .. s[3] end
    local body = nil
    if s[4] ~= "" then
      headers["Content-Type"] = "application/json"
      body = s[4]
    end
    reqs[k] = wrk.format(s[1], s[2], headers, body)
  end
end

function request()
  n = n + 1
  return reqs[(n - 1) %% #reqs + 1]
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    errors = errors + 1
    if bad == "" then bad = status .. " " .. string.sub(body or "", 1, 300) end
  end
end

function done(summary, latency, requests)
  local non2xx = 0
  local example = ""
  for _, t in ipairs(threads) do
    non2xx = non2xx + t:get("errors")
    if example == "" then example = t:get("bad") or "" end
  end
  local q = {}
  for k = 1, 1000 do q[k] = string.format("%%d", latency:percentile(k / 10)) end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%%d,"duration_us":%%d,"non_2xx":%%d,"connect":%%d,"read":%%d,' ..
    '"write":%%d,"timeout":%%d,"status":%%d,"max_us":%%d,"mean_us":%%.1f,"quantiles_us":[%%s]}\\n',
    summary.requests, summary.duration, non2xx, e.connect, e.read, e.write, e.timeout,
    e.status, latency.max, latency.mean, table.concat(q, ",")))
  if example ~= "" then io.write("WRK_BAD " .. example .. "\\n") end
end
"""


def _lua_text(text: str) -> str:
    """``text`` as a Lua long string (JSON bodies and hex tokens hold no ``]==]``)."""
    if "]==]" in text:
        raise BenchError(f"a request holds ']==]': {text[:80]}")
    return f"[==[{text}]==]"


def wrk_script(specs: list[Spec]) -> str:
    """The Lua script of a wrk run sending ``specs`` in turn."""
    rows = ", ".join("{" + ", ".join(_lua_text(part) for part in spec) + "}" for spec in specs)
    return _WRK_LUA % {"specs": rows}


def wrk_version() -> str | None:
    path = shutil.which("wrk")
    if path is None:
        return None
    run = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return (run.stdout + run.stderr).split("Copyright")[0].strip() or "wrk"


async def run_wrk(base: str, script: Path, *, connections: int, threads: int,
                  seconds: float) -> dict[str, Any]:  # fmt: skip
    """One wrk window; its ``done`` JSON with the client's CPU seconds (``client_cpu_s``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = await asyncio.create_subprocess_exec(
        "wrk", "-t", str(min(threads, connections)), "-c", str(connections),
        "-d", f"{max(1, math.ceil(seconds))}s", "--timeout", "30s", "-s", str(script), base,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out.decode("utf-8", "replace")
    line = next((x for x in text.splitlines() if x.startswith("WRK_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise BenchError(f"wrk failed ({proc.returncode}): {text[-500:]} {err.decode()[-500:]}")
    found: dict[str, Any] = json.loads(line[len("WRK_JSON "):])
    bad = next((x[len("WRK_BAD "):] for x in text.splitlines() if x.startswith("WRK_BAD ")), None)
    sockets = {k: found[k] for k in ("connect", "read", "write", "timeout")}
    if found["non_2xx"] or any(sockets.values()):
        raise BenchError(f"wrk: {found['non_2xx']} responses outside 2xx (first: {bad}),"
                         f" socket errors {sockets}")  # fmt: skip
    found["client_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return found


def _merged_percentiles(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """p50/p90/p99/max in ms over several wrk windows: each window's 1,000 quantiles stand
    for its requests in equal shares (exact within a window up to HdrHistogram's precision)."""
    points: list[tuple[float, float]] = []
    for w in windows:
        share = w["requests"] / len(w["quantiles_us"])
        points += [(q / 1e3, share) for q in w["quantiles_us"]]
    points.sort()
    total = sum(s for _, s in points)

    def at(q: float) -> float:
        acc = 0.0
        for value, share in points:
            acc += share
            if acc >= q * total - 1e-9:
                return round(value, 3)
        return round(points[-1][0], 3)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99),
            "max": round(max(w["max_us"] for w in windows) / 1e3, 3),
            "n": sum(w["requests"] for w in windows)}  # fmt: skip


WrkWay = tuple[str, list[Spec], int]  # the route (metrics label), the requests, connections


async def wrk_windows(servers: list[Server], ways: dict[str, WrkWay], work: Path, *, seconds: float,
                      rounds: int, threads: int) -> list[dict[str, dict[str, Any]]]:  # fmt: skip
    """``closed_loop``'s figures measured by wrk, per server: per way a warm-up second, then
    the ways (and the servers: a comparison's windows interleave) alternate ``rounds`` times
    for ``seconds`` each; server CPU and its histogram per window."""
    scripts = {}
    for name, (_, specs, _) in ways.items():
        scripts[name] = work / f"wrk-{name}.lua"
        scripts[name].write_text(wrk_script(specs), encoding="utf-8")
    for server in servers:
        for name, (_, _, conns) in ways.items():
            await run_wrk(server.base, scripts[name], connections=conns, threads=threads, seconds=1)
    load = _loadavg()
    sums = [{n: {"windows": [], "cpu": 0.0, "buckets": {}} for n in ways} for _ in servers]
    for _ in range(rounds):
        for name, (route, _, conns) in ways.items():
            for server, by_way in zip(servers, sums, strict=True):
                row: dict[str, Any] = by_way[name]
                single = len(server.pids()) == 1
                async with _client(server.base, server.scraper) as scraper:
                    before = await _histogram(scraper, route) if single else {}
                    cpu0 = server.cpu_s()
                    row["windows"].append(await run_wrk(server.base, scripts[name], connections=conns,
                                                        threads=threads, seconds=seconds))  # fmt: skip
                    row["cpu"] += server.cpu_s() - cpu0
                    for le, c in (await _histogram(scraper, route) if single else {}).items():
                        row["buckets"][le] = row["buckets"].get(le, 0) + c - before.get(le, 0)
    return [_wrk_rows(by_way, ways, load, len(server.pids()) == 1) for server, by_way in zip(servers, sums, strict=True)]


def _wrk_rows(sums: dict[str, dict[str, Any]], ways: dict[str, WrkWay], load: str,
              single: bool) -> dict[str, dict[str, Any]]:  # fmt: skip
    out = {}
    for name, row in sums.items():
        windows, cpu = row["windows"], row["cpu"]
        n, wall = sum(w["requests"] for w in windows), sum(w["duration_us"] for w in windows) / 1e6
        out[name] = {
            "client": "wrk", "clients": ways[name][2], "latency_ms": _merged_percentiles(windows),
            "wall_s": round(wall, 2), "server_side_ms": _quantiles(row["buckets"]) if single else None,
            "requests_per_s": round(n / wall, 1), "server_cpu_s": round(cpu, 2),
            "requests_per_server_cpu_s": round(n / cpu, 1) if cpu else None,
            "server_cpu_us_per_request": round(cpu / n * 1e6, 1) if n else None,
            "client_cpu_s": round(sum(w["client_cpu_s"] for w in windows), 2),
            "loadavg_before": load, "loadavg_after": _loadavg(),
        }  # fmt: skip
    return out


class Bench:
    """The parts of the benchmark over one running server."""

    def __init__(self, server: Server, meta: dict[str, Any], tokens: dict[str, str], writer: str,
                 args: argparse.Namespace) -> None:  # fmt: skip
        self.server, self.args, self.writer = server, args, writer
        self.compared: Server | None = None  # --compare-path: another checkout's server
        self.actors = meta["actors"]
        self.tokens = tokens
        others = [f for a in self.actors[1:] for f in meta["facts"][a["tenant"]][:2]]
        self.targets = {}  # per actor: its tenant's facts and a few of other tenants (denied)
        for actor in self.actors:
            own = meta["facts"][actor["tenant"]]
            foreign = [f for f in others if not f.startswith(actor["tenant"] + "-")]
            foreign = foreign[: len(own) // 8]
            self.targets[actor["id"]] = own + foreign

    @property
    def wrk(self) -> bool:
        return bool(self.args.client == "wrk")

    def _eval_specs(self, actors: list[dict[str, Any]], per_actor: int | None = None) -> list[Spec]:
        """Evaluations for wrk: the actors in turn, each over its targets."""
        lists = {a["id"]: self.targets[a["id"]][:per_actor] for a in actors}
        rounds = max(len(v) for v in lists.values())
        return [("POST", EVALUATION, self.tokens[a["id"]],
                 json.dumps(evaluation_body(a, lists[a["id"]][i % len(lists[a["id"]])])))
                for i in range(rounds) for a in actors]  # fmt: skip

    def _batch_specs(self, actor: dict[str, Any], count: int = 16) -> list[Spec]:
        facts, size = self.targets[actor["id"]], self.args.batch_size
        return [("POST", EVALUATIONS, self.tokens[actor["id"]],
                 json.dumps(evaluations_body(actor, [facts[(i * size + j) % len(facts)] for j in range(size)])))
                for i in range(count)]  # fmt: skip

    async def _wrk(self, ways: dict[str, WrkWay]) -> dict[str, dict[str, Any]]:
        """The ways on the server, and on the compared one (``--compare-path``) in between:
        its rows under ``compared`` in each way's row."""
        servers = [self.server, *([self.compared] if self.compared is not None else [])]
        found = await wrk_windows(servers, ways, self.args.work, seconds=self.args.wrk_seconds,
                                  rounds=self.args.rounds, threads=self.args.wrk_threads)  # fmt: skip
        if len(found) > 1:
            for name, row in found[0].items():
                row["compared"] = {"path": self.args.compare_path, **found[1][name]}
        return found[0]

    def _eval_call(self, actor: dict[str, Any]) -> Call:
        facts = self.targets[actor["id"]]

        def call(client: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
            return client.post(EVALUATION, json=evaluation_body(actor, facts[i % len(facts)]))

        return call

    def _batch_call(self, actor: dict[str, Any]) -> Call:
        facts, size = self.targets[actor["id"]], self.args.batch_size

        def call(client: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
            chosen = [facts[(i * size + j) % len(facts)] for j in range(size)]
            return client.post(EVALUATIONS, json=evaluations_body(actor, chosen))

        return call

    async def probe(self) -> dict[str, Any]:
        """Each target once through both endpoints: the shapes work and decisions differ."""
        actor = self.actors[0]
        async with _client(self.server.base, self.tokens[actor["id"]]) as client:
            facts = self.targets[actor["id"]]
            single = [_checked(await client.post(EVALUATION, json=evaluation_body(actor, f))).json()
                      for f in facts]  # fmt: skip
            batch = _checked(await client.post(EVALUATIONS, json=evaluations_body(actor, facts)))
        if not any(r["decision"] for r in single):
            raise BenchError(f"no evaluation of {actor['id']}'s facts was permitted: {single[:2]}")
        rows = batch.json().get("evaluations")
        if not isinstance(rows, list) or [r["decision"] for r in rows] != [r["decision"] for r in single]:
            raise BenchError(f"the batch's decisions differ from single ones: {batch.text[:300]}")  # fmt: skip
        return {"actor": actor["id"], "targets": len(facts), **_decisions(single),
                "denial_example": next((r for r in single if not r["decision"]), None)}  # fmt: skip

    async def single(self) -> dict[str, Any]:
        """One client: evaluations, and ``GET /healthz`` beside them (HTTP and client cost)."""
        actor = self.actors[0]
        if self.wrk:
            rows = await self._wrk({"evaluation": (EVALUATION, self._eval_specs([actor]), 1),
                                    "healthz": ("/healthz", [HEALTHZ], 1)})  # fmt: skip
            evaluation, floor = rows["evaluation"], rows["healthz"]
            return {**evaluation, "floor_healthz": floor, **_beyond(evaluation, floor)}
        async with _client(self.server.base, self.tokens[actor["id"]]) as client:
            ways = {"evaluation": (EVALUATION, [self._eval_call(actor)]),
                    "healthz": ("/healthz", [_healthz])}  # fmt: skip
            rows = await closed_loop(self.server, [client], ways, self.args.single, warmup=200,
                                     rounds=self.args.rounds)  # fmt: skip
        evaluation, floor = rows["evaluation"], rows["healthz"]
        return {**evaluation, "floor_healthz": floor, **_beyond(evaluation, floor)}

    async def concurrent(self) -> dict[str, Any]:
        actors = [self.actors[k % len(self.actors)] for k in range(self.args.clients)]
        if self.wrk:
            distinct = list({a["id"]: a for a in actors}.values())
            n = self.args.clients
            rows = await self._wrk({"evaluation": (EVALUATION, self._eval_specs(distinct, 16), n),
                                    "healthz": ("/healthz", [HEALTHZ], n)})  # fmt: skip
            evaluation, floor = rows["evaluation"], rows["healthz"]
            return {"evaluation": evaluation, "floor_healthz": floor, **_beyond(evaluation, floor),
                    "distinct_callers": len(distinct), "callers": "taken in turn per request"}  # fmt: skip
        clients = [_client(self.server.base, self.tokens[a["id"]]) for a in actors]
        try:
            ways = {"evaluation": (EVALUATION, [self._eval_call(a) for a in actors]),
                    "healthz": ("/healthz", [_healthz] * len(clients))}  # fmt: skip
            each = max(1, self.args.concurrent // len(clients))
            rows = await closed_loop(self.server, clients, ways, each, warmup=5, rounds=self.args.rounds)  # fmt: skip
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))
        evaluation, floor = rows["evaluation"], rows["healthz"]
        return {"evaluation": evaluation, "floor_healthz": floor, **_beyond(evaluation, floor),
                "distinct_callers": len({a["id"] for a in actors})}  # fmt: skip

    async def batch(self) -> dict[str, Any]:
        actor = self.actors[0]
        if self.wrk:
            rows = await self._wrk({"batch": (EVALUATIONS, self._batch_specs(actor), 1)})
        else:
            async with _client(self.server.base, self.tokens[actor["id"]]) as client:
                ways = {"batch": (EVALUATIONS, [self._batch_call(actor)])}
                rows = await closed_loop(self.server, [client], ways, self.args.batches, warmup=20, rounds=1)
        row, size = rows["batch"], self.args.batch_size
        per_cpu = row["requests_per_server_cpu_s"]
        return {**row, "size": size, "evaluations_per_server_cpu_s": per_cpu and round(per_cpu * size, 1)}

    async def watch(self) -> dict[str, Any]:
        """Append facts visible to the watcher (one at a time, each of a new key, in the
        tenant's global scope); time each change's arrival on its stream."""
        actor = self.actors[0]
        arrivals: dict[str, float] = {}
        seen: list[str] = []
        async with _client(self.server.base, self.tokens[actor["id"]]) as reader, \
                _client(self.server.base, self.writer) as writer:  # fmt: skip
            # the token of the log the watcher last saw (an authenticated answer carries it)
            since = _checked(await reader.post("/v1/resolve", json={"view": "json"})).headers.get("Gamma-Token")
            if since is None:
                raise BenchError("no Gamma-Token header on the server's responses")
            ready = asyncio.Event()

            async def listen() -> None:
                async with reader.stream("GET", "/v1/watch", params={"since": since},
                                         timeout=httpx.Timeout(60, read=None)) as stream:  # fmt: skip
                    if stream.status_code != 200:
                        await stream.aread()  # the refusal's body, for the error
                    _checked(stream)
                    ready.set()
                    data: list[str] = []
                    async for line in stream.aiter_lines():
                        now = time.perf_counter()
                        if line.startswith("data:"):
                            data.append(line[5:].strip())
                        elif not line and data:
                            text = "\n".join(data)
                            seen.append(text)
                            for key in pending:  # the change names the fact's key
                                if f'"{key}"' in text and key not in arrivals:
                                    arrivals[key] = now
                            data = []

            pending: list[str] = []
            task = asyncio.create_task(listen())
            try:
                opened = asyncio.create_task(ready.wait())
                await asyncio.wait({task, opened}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
                opened.cancel()
                if task.done():
                    task.result()  # the stream's refusal (BenchError) or its failure
                    raise BenchError("GET /v1/watch ended before any append")
                if not ready.is_set():
                    raise BenchError("GET /v1/watch did not answer within 60 s")
                run = secrets.token_hex(4)
                sent, answered, lost = {}, {}, []
                for k in range(self.args.watch_appends):
                    key = f"bench-{run}-{k}"  # the server assigns the ids: a key of our own
                    pending.append(key)
                    event = {"type": "assert", "key": key, "value": f"v{k}"}
                    sent[key] = time.perf_counter()
                    _checked(await writer.post("/v1/append", json={"events": [event]}))
                    answered[key] = time.perf_counter()
                    deadline = answered[key] + 5
                    while key not in arrivals and time.perf_counter() < deadline and not task.done():
                        await asyncio.sleep(0.0005)  # fmt: skip
                    if key not in arrivals:
                        lost.append(key)
                    await asyncio.sleep(0.02)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if len(lost) == len(sent):
            why = task.exception() if task.done() and not task.cancelled() else None
            raise BenchError(f"no appended fact reached the watcher in 5 s ({why!r}); stream: {seen[:3]}")
        got = [k for k in sent if k in arrivals]
        return {"appends": len(sent), "not_seen_within_5_s": len(lost),
                "latency_ms": _percentiles([(arrivals[k] - answered[k]) * 1e3 for k in got]),
                "from_request_ms": _percentiles([(arrivals[k] - sent[k]) * 1e3 for k in got]),
                "append_ms": _percentiles([(answered[k] - sent[k]) * 1e3 for k in got]),
                "example": seen[-1][:400] if seen else None}  # fmt: skip

    async def rss(self) -> dict[str, Any]:
        """Load for ``--duration`` seconds while sampling RSS; the fitted growth after warm-up."""
        actors = [self.actors[k % len(self.actors)] for k in range(self.args.rss_clients)]
        stop = time.perf_counter() + self.args.duration
        count = [0]

        async def load(actor: dict[str, Any]) -> None:
            single, batch = self._eval_call(actor), self._batch_call(actor)
            async with _client(self.server.base, self.tokens[actor["id"]]) as client:
                i = 0
                while time.perf_counter() < stop:
                    _checked(await (batch if i % 10 == 9 else single)(client, i))
                    i += 1
                count[0] += i

        async def sample() -> list[tuple[float, float]]:
            points, t0 = [], time.perf_counter()
            while time.perf_counter() < stop:
                points.append((time.perf_counter() - t0, self.server.rss_mib()))
                await asyncio.sleep(self.args.rss_interval)
            points.append((time.perf_counter() - t0, self.server.rss_mib()))
            return points

        cpu0 = self.server.cpu_s()
        *_, points = await asyncio.gather(*(load(a) for a in actors), sample())
        cpu = self.server.cpu_s() - cpu0
        settled = [p for p in points if p[0] >= self.args.duration / 10] or points
        slope = _slope(settled)
        span = settled[-1][0] - settled[0][0]
        growth = slope * span
        limit = max(0.02 * settled[0][1], 5.0)
        return {"duration_s": self.args.duration, "clients": len(actors), "requests": count[0],
                "server_cpu_s": round(cpu, 1), "samples": len(points),
                "first_mib": round(points[0][1], 1), "after_warmup_mib": round(settled[0][1], 1),
                "last_mib": round(points[-1][1], 1), "max_mib": round(max(p[1] for p in points), 1),
                "slope_mib_per_min": round(slope * 60, 3), "growth_fitted_mib": round(growth, 2),
                "flat_limit_mib": round(limit, 2), "flat": growth <= limit,
                "series": [[round(t, 1), round(m, 1)] for t, m in points[:: max(1, len(points) // 60)]]}  # fmt: skip


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares MiB per second."""
    if len(points) < 2:
        return 0.0
    mt = statistics.fmean(t for t, _ in points)
    mm = statistics.fmean(m for _, m in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (m - mm) for t, m in points) / den if den else 0.0


def goals(report: dict[str, Any]) -> dict[str, Any]:
    """Each goal of issue 31 beside the figure this run measured (None: not measured)."""
    found = {}
    for name, (path, limit) in GOALS.items():
        value: Any = report
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if path[0] == "rss":
            met = None if value is None else report["rss"]["flat"]
            limit = report.get("rss", {}).get("flat_limit_mib")
        elif path[0] == "watch":  # and every change seen
            met = None if value is None else value <= limit and not report["watch"]["not_seen_within_5_s"]
        else:
            met = None if value is None else value <= limit
        found[name] = {"measured": value, "limit": limit, "met": met}
    return found


PARTS = ("single", "concurrent", "batch", "watch", "rss")


async def measure(bench: Bench, parts: list[str], report: dict[str, Any]) -> None:
    """The probe, then each part; a part the server refuses is its ``error`` and the next runs."""
    report["probe"] = await bench.probe()
    failed = []
    for part in parts:
        print(f"serve bench: {part} ...", file=sys.stderr, flush=True)
        try:
            report[part] = await getattr(bench, part)()
        except (BenchError, httpx.HTTPError) as error:
            report[part] = {"error": f"{type(error).__name__}: {error}"}
            failed.append(part)
            print(f"serve bench: {part}: {report[part]['error']}", file=sys.stderr, flush=True)
        if bench.server.proc is not None and bench.server.proc.poll() is None:
            report[part]["server_rss_mib_after"] = round(bench.server.rss_mib(), 1)
    if failed:
        raise BenchError(f"parts failed: {', '.join(failed)} (each part's error says why)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients (default 64)")
    ap.add_argument("--single", type=int, default=2000, help="single-client evaluations (default 2000)")
    ap.add_argument("--concurrent", type=int, default=6400, help="evaluations over all clients")
    ap.add_argument("--rounds", type=int, default=2, help="alternations of evaluation and /healthz")
    ap.add_argument("--batches", type=int, default=500, help="batch requests (default 500)")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--watch-appends", type=int, default=50)
    ap.add_argument("--duration", type=float, default=60, help="seconds of the RSS run (issue: 600)")
    ap.add_argument("--rss-clients", type=int, default=8)
    ap.add_argument("--rss-interval", type=float, default=1.0)
    ap.add_argument("--parts", default=",".join(PARTS), help="a subset of " + ",".join(PARTS))
    ap.add_argument("--workdir", default=None, help="keep the store here and reuse it (default: a temp dir)")
    ap.add_argument("--build-only", action="store_true", help="build the store in --workdir, measure nothing")
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--server-arg", action="append", default=[], help="passed to gamma serve (repeatable)")
    ap.add_argument("--client", choices=("auto", "wrk", "httpx"), default="auto",
                    help="the load generator of the single, concurrent and batch parts"
                         " (auto: wrk when installed, else httpx)")  # fmt: skip
    ap.add_argument("--wrk-seconds", type=float, default=5, help="seconds per wrk window (default 5)")
    ap.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (default 1)")
    ap.add_argument("--server-path", default=None,
                    help="run the server from this checkout's gamma (PYTHONPATH; e.g. a worktree of HEAD)")
    ap.add_argument("--compare-path", default=None,
                    help="also serve a copy of the store from this checkout's gamma, its wrk windows"
                         " interleaved with the server's (before and after in one run)")  # fmt: skip
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    version = wrk_version()
    if args.client == "auto":
        args.client = "wrk" if version else "httpx"
    if args.client == "wrk" and version is None:
        ap.error("--client wrk: wrk is not installed")
    parts = [p for p in args.parts.split(",") if p]
    if unknown := sorted(set(parts) - set(PARTS)):
        ap.error(f"--parts: unknown {unknown}")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gamma-serve-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    args.work = work
    probes = min(args.tenants, args.clients)
    report: dict[str, Any] = {"benchmark": "serve", "command": [sys.executable, *sys.argv],
                              "environment": _environment(),
                              "options": {k: str(v) if k == "work" else v for k, v in vars(args).items()},
                              "client": {"wrk": version, "httpx": httpx.__version__}[args.client]}  # fmt: skip
    server = compared = None
    try:
        store, meta = store_for(work, args.events, args.tenants, probes, args.seed,
                                copy=not args.build_only)  # fmt: skip
        report["store"] = {k: v for k, v in meta.items() if k not in ("actors", "facts", "tenant_asserts")}
        report["store"]["probe_tenant_asserts"] = meta["tenant_asserts"][meta["actors"][0]["tenant"]]
        if args.build_only:
            return _write(report, args.out)
        tokens, writer, scraper = write_callers(work / "callers.toml", meta["actors"])
        server = Server(store, work / "callers.toml", work, args.server_arg, args.server_path)
        server.scraper = scraper
        report["server"] = {"argv": server.argv[1:], "path": args.server_path, "ready_s": round(server.start(args.ready_timeout), 2),
                            "rss_mib_ready": round(server.rss_mib(), 1)}  # fmt: skip
        report["at_issue_scale"] = args.events >= 10**6 and args.tenants >= 1000 and args.duration >= 600
        try:
            bench = Bench(server, meta, tokens, writer, args)
            if args.compare_path:
                other = work / "run-b.db"
                for stale in work.glob("run-b.db*"):
                    stale.unlink()
                shutil.copyfile(store, other)
                bench.compared = compared = Server(other, work / "callers.toml", work, args.server_arg,
                                                   args.compare_path)  # fmt: skip
                compared.log = work / "server-b.log"
                compared.scraper = scraper
                report["compared_server"] = {"argv": compared.argv[1:], "path": args.compare_path,
                                             "ready_s": round(compared.start(args.ready_timeout), 2)}  # fmt: skip
            asyncio.run(measure(bench, parts, report))
        finally:
            report["goals"] = goals(report)
    except BenchError as error:
        report["error"] = str(error)
        print(f"serve bench: {error}", file=sys.stderr)
        if server is not None and server.log.exists():
            report["server_log_tail"] = server.tail()
    finally:
        if compared is not None:
            compared.stop()
        if server is not None:
            server.stop()
            report.setdefault("server", {})["exit"] = server.proc.returncode if server.proc else None
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return _write(report, args.out)


def _write(report: dict[str, Any], out: str | None) -> int:
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    if out:
        Path(out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 1 if "error" in report else 0


if __name__ == "__main__":
    raise SystemExit(main())
