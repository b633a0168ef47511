"""A gamma log written from StateBench's own generator: a workload gamma did not write.

``synth.py`` is ours, and a fast path tuned to it proves little. This log is made by
``statebench==2.0.0``'s ``TimelineGenerator`` (the seed paper's benchmark: supersession,
authority conflicts, dependency chains, commitments, scope and permission leaks, ...; 19
tracks, taken in turn), each timeline turned into events by gamma's StateBench importer
(``convert_timeline``, SPEC §15), and the timelines laid end to end as one organisation's
memory would grow:

* timeline ``k``'s tenant is its organisation (StateBench draws it from 18) with ``.k %
  spread`` appended, so a tenant collects many conversations and its keys (StateBench reuses
  ``unit_price``, ``primary_commitment``, ...) build up revision histories across them;
* its fact, experience and event ids (``F-APPL-001``, ``ev1``) get the prefix ``tK-``, and so
  do the references that name them (``supersedes``, ``depends_on``, ``uses``, ``fact``);
* its times keep their offsets from its first event, which is placed ``STEP`` after timeline
  ``k - 1``'s; the log is then ordered by time (timelines that last longer overlap).

Lines are written by Python's ``json.dumps`` with its default separators (``", "``, ``":
"``) and key order as the importer built it: another encoder than gamma's. The same ``(n,
seed, spread)`` always gives the same bytes. Install StateBench as ``memgine.py`` says.

``probe(lines)`` names an actor for a benchmark: the user of the tenant with the most
events, at the log's last time. Command line::

    python benchmarks/statebench_log.py --events 100000 --out sb-100k.jsonl

A script, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from statebench.generator.engine import TimelineGenerator  # not gamma's: see memgine.py

from gamma.conformance.statebench.importer import convert_timeline

__test__ = False  # never a pytest module

#: The tracks of ``TimelineGenerator.generate_track``, taken in turn.
TRACKS = (
    "supersession", "supersession_maintain", "authority_conflict", "dependency_chain",
    "authority_maintain", "commitment_durability", "interruption_resumption",
    "scope_permission", "environmental_freshness", "hallucination_resistance", "scope_leak",
    "causality", "repair_propagation", "brutal_realistic", "supersession_detection",
    "adversarial", "enterprise_privacy", "authority_hierarchy", "applicability",
)  # fmt: skip
#: The time between the starts of two timelines.
STEP = timedelta(seconds=60)
START = datetime(2026, 1, 1, tzinfo=UTC)
#: Fields naming an id that the timeline defines (one or a list).
REFERENCES = ("fact", "experience", "supersedes", "depends_on", "uses")
STAMPS = ("ts", "valid_from", "valid_until")


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def timelines(seed: int) -> Iterator[list[dict[str, Any]]]:
    """Each generated timeline's events, as the importer writes them, without end."""
    generator = TimelineGenerator(seed=seed)
    while True:
        for track in TRACKS:
            for timeline in generator.generate_track(track, count=1):
                case, _ = convert_timeline(json.loads(timeline.model_dump_json()))
                if case["events"]:
                    yield case["events"]


def placed(events: list[dict[str, Any]], k: int, spread: int) -> list[dict[str, Any]]:
    """Timeline ``k``'s events with its own ids, tenant and start time."""
    defined = {e["id"] for e in events} | {e[f] for e in events for f in ("fact", "experience")
                                           if e["type"] in ("assert", "experience") and f in e}
    first = min(_stamp(e["ts"]) for e in events)
    shift = START + k * STEP - first
    out = []
    for event in events:
        event = dict(event)
        event["id"] = f"t{k}-{event['id']}"
        event["tenant"] = f"{event['tenant']}.{k % spread}"
        for name in REFERENCES:
            found = event.get(name)
            if isinstance(found, str) and found in defined:
                event[name] = f"t{k}-{found}"
            elif isinstance(found, list):
                event[name] = [f"t{k}-{item}" if item in defined else item for item in found]
        for name in STAMPS:
            if name in event:
                event[name] = _text(_stamp(event[name]) + shift)
        out.append(event)
    return out


def lines(n: int, seed: int = 0, spread: int = 64) -> list[str]:
    """The first ``n`` events of the log (whole timelines, cut at ``n``), time-ordered."""
    events: list[tuple[str, int, int, dict[str, Any]]] = []
    for k, timeline in enumerate(timelines(seed)):
        if len(events) >= n:
            break
        for index, event in enumerate(placed(timeline, k, spread)):
            events.append((event["ts"], k, index, event))
    events.sort(key=lambda item: item[:3])
    return [json.dumps(event) for _, _, _, event in events[:n]]


def probe(log: list[str]) -> dict[str, Any]:
    """An actor for a benchmark: the importer's user (``u1``) of the busiest tenant, at the
    log's last time."""
    tenants = Counter(json.loads(line)["tenant"] for line in log)
    tenant = min(tenants, key=lambda name: (-tenants[name], name))
    return {"actor": {"id": "u1", "tenant": tenant}, "at": json.loads(log[-1])["ts"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", type=int, default=64, help="tenants per organisation")
    parser.add_argument("--out", default=None, help="write the log here (default stdout)")
    args = parser.parse_args(argv)
    log = lines(args.events, args.seed, args.spread)
    text = "".join(line + "\n" for line in log)
    if args.out is None:
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
        print(json.dumps(probe(log)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
