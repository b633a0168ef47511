"""The reader's floor, stage by stage, against ``json.loads`` of the same lines.

Issue 12 asks for a parse and validation within 1.5x of ``json.loads`` while keeping the attrs
model. This measures how much of that budget each stage the reader cannot skip takes by
itself, in one process, on the plain lines of the synthetic log (``synth.py``):

* ``json_loads``: ``json.loads`` of every line (str), the yardstick;
* ``msgspec_decode``: msgspec's typed decode of every line into gamma's plain structs
  (``gamma.core.reading.plain``), which checks every field's type in C;
* ``decode_encode``: that and the sorted encoding that is each event's canonical text;
* ``decode_convert``: the decode and ``msgspec.convert`` of each struct into the attrs event,
  with none of the reader's checks: the cost of having an attrs model at all;
* ``plain_line``: all the plain path does (checks, interning, the attrs event, its text);
* ``hashing``: the chain step and the Merkle leaf of every event's canonical bytes;
* ``parse_events``: the whole reader (every way in, the log's rules, the hashing).

Each stage runs ``--rounds`` times, alternated with the others so that drifts in the shared
machine's speed hit every stage alike, with the collector off (the reader pauses it too) and
a ``gc.collect()`` between runs. Figures are CPU seconds (``process_time``), the minimum and
the median, and each stage's minimum over ``json_loads``'s; ``floor_over_json_loads`` is
``decode_convert`` plus ``hashing``, the least any reader into this model that also hashes
can cost.

Usage::

    python benchmarks/floor.py [--sizes 10000,100000] [--rounds 3] [--out floor.json]

A script, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth  # noqa: E402

from gamma.core.integrity.chain import GENESIS, step_bytes  # noqa: E402
from gamma.core.integrity.merkle import TreeBuilder  # noqa: E402
from gamma.core.reading import plain  # noqa: E402
from gamma.core.reading.events import parse_events  # noqa: E402

__test__ = False


def stages(texts: list[str], lines: list[bytes]) -> dict[str, Callable[[], object]]:
    """Each stage as a function of no arguments over the same lines."""
    decode, encode, convert = plain._decode_plain, plain._encode_plain, msgspec.convert
    models = plain._MODEL
    canonical = [encode(decode(line)) for line in lines]  # each event's text, hashed below

    def json_loads() -> object:
        loads = json.loads
        return [loads(text) for text in texts]

    def msgspec_decode() -> object:
        return [decode(line) for line in lines]

    def decode_encode() -> object:
        return [(typed, encode(typed)) for typed in map(decode, lines)]

    def decode_convert() -> object:
        return [convert(t, models[type(t)], from_attributes=True) for t in map(decode, lines)]

    def plain_line() -> object:
        read = plain.plain_line
        return [read(line, None, known_plain=True) for line in lines]

    def hashing() -> object:
        chain, tree = GENESIS, TreeBuilder()
        for data in canonical:
            chain = step_bytes(chain, data)
            tree.add(data)
        return chain, tree.head()

    def whole_reader() -> object:
        return parse_events(texts)  # as a library caller hands it lines

    return {
        "json_loads": json_loads,
        "msgspec_decode": msgspec_decode,
        "decode_encode": decode_encode,
        "decode_convert": decode_convert,
        "plain_line": plain_line,
        "hashing": hashing,
        "parse_events": whole_reader,
    }


def run_size(n: int, rounds: int) -> dict[str, Any]:
    """Every stage at ``n`` events, alternated ``rounds`` times."""
    texts = list(synth.lines(n))
    lines = [text.encode("ascii") for text in texts]
    if not plain.is_plain(b"\n".join(lines)):
        raise SystemExit("the synthetic log is not plain: this measures the plain path")
    work = stages(texts, lines)
    for run in work.values():  # warm up: first calls import and cache what they use
        run()
    times: dict[str, list[float]] = {name: [] for name in work}
    gc.disable()
    try:
        for _ in range(rounds):
            for name, run in work.items():
                gc.collect()
                start = time.process_time()
                kept = run()
                times[name].append(time.process_time() - start)
                del kept
    finally:
        gc.enable()
    base = min(times["json_loads"])
    out: dict[str, Any] = {"events": n, "stages": {}}
    for name, runs in times.items():
        out["stages"][name] = {
            "cpu_s_min": round(min(runs), 4),
            "cpu_s_median": round(statistics.median(runs), 4),
            "over_json_loads": round(min(runs) / base, 3),
            "runs": [round(t, 4) for t in runs],
        }
    floor = min(times["decode_convert"]) + min(times["hashing"])
    out["floor_over_json_loads"] = round(floor / base, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated event counts")
    parser.add_argument("--rounds", type=int, default=3, help="alternated runs of every stage")
    parser.add_argument("--out", default="-", help="JSON file (default: stdout)")
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",") if part]
    result = {"benchmark": "floor", "statistic": "CPU seconds (process_time), min of rounds",
              "rounds": args.rounds, "loadavg_start": os.getloadavg(), "sizes": []}  # fmt: skip
    for n in sizes:
        print(f"[floor] {n} events ...", file=sys.stderr, flush=True)
        row = run_size(n, args.rounds)
        result["sizes"].append(row)
        summary = ", ".join(f"{k} {v['over_json_loads']}x" for k, v in row["stages"].items())
        print(f"[floor] {n}: {summary}", file=sys.stderr, flush=True)
    result["loadavg_end"] = os.getloadavg()
    text = json.dumps(result, indent=2) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
