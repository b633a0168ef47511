#!/usr/bin/env python3
"""An external memory system speaking gamma's conformance protocol.

Reads one JSON case per line on stdin, writes one JSON reply per line on stdout
(SPEC.md §14). Two modes, to show both kinds of answer:

    gamma conformance --system "python examples/memory_system.py"          # governed
    gamma conformance --system "python examples/memory_system.py --naive"  # naive

* governed (default): a resolver-level answer computed by gamma itself; it passes.
* ``--naive``: a tiny memory without governance. It remembers the last value said for
  each key, picks the key whose words best match the question, and answers at the agent
  level with a verdict of KEEP for every past action. It leaks, drifts and fails: what
  the suite exists to catch.

Replace ``answer`` with a call into your own system; keep stdout for replies only.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")


def governed(case: dict[str, Any]) -> dict[str, Any]:
    """Γ(events, actor, at) through gamma's Python API, as a resolver-level reply."""
    import gamma

    p = case["policy"]
    policy = gamma.Policy(
        authority_ladder=tuple(p["authority"]["ladder"]), authority_default=p["authority"]["default"],
        clearance_ladder=tuple(p["clearance"]["ladder"]), clearance_default=p["clearance"]["default"],
        same_key=p["supersession"]["same_key"], dependency_mode=p["dependencies"]["mode"],
        restricted_keys=p["disclosure"]["restricted_keys"],
    )
    events = gamma.parse_events([json.dumps(e) for e in case["events"]], policy=policy)
    resolution = gamma.resolve(events, case["actor"], case["at"], policy)
    ignored: dict[str, str] = {}
    for item in resolution.ignored:
        ignored.setdefault(item.event, item.code)
    return {
        "admitted": [a.fact for a in resolution.admitted],
        "values": {a.fact: a.value for a in resolution.admitted},  # recomputed ones included
        "needs_recheck": [a.fact for a in resolution.admitted if a.needs_recheck],
        "excluded": {x.fact: list(x.codes) for x in resolution.excluded},
        "experiences": {x.experience: x.verdict for x in resolution.experiences},
        "ignored": ignored,
    }


def naive(case: dict[str, Any]) -> dict[str, Any]:
    """Last value per key, the key chosen by word overlap with the question; no governance."""
    memory: dict[str, Any] = {}
    experiences = False
    at = datetime.fromisoformat(case["at"])
    for event in case["events"]:
        if datetime.fromisoformat(event["ts"]) > at:  # it heard only what was said by then
            break
        if event["type"] == "assert":
            memory[event["key"]] = event["value"]
        experiences = experiences or event["type"] == "experience"
    asked = set(_WORD.findall(case["question"].lower()))
    best = max(memory, key=lambda k: len(asked & set(_WORD.findall(k.lower()))), default=None)
    value = memory.get(best) if best is not None else None
    reply: dict[str, Any] = {
        "response": "no current value" if value is None else str(value),
        "context": "\n".join(f"{k} = {json.dumps(v)}" for k, v in memory.items()),
    }
    if experiences:
        reply["verdict"] = "KEEP"
    return reply


def answer(case: dict[str, Any], mode: str) -> dict[str, Any]:
    reply = naive(case) if mode == "naive" else governed(case)
    return {"id": case["id"], **reply}


def main(argv: list[str]) -> int:
    mode = "naive" if "--naive" in argv else "governed"
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            reply = answer(case, mode)
        except Exception as exc:  # noqa: BLE001 - say so for this case, keep serving the rest
            reply = {"id": case.get("id"), "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
