"""Every output is linear in its input, and nothing recurses on the log (SPEC §5, output size).

Worst shapes a log controls: a dependency chain whose root is retracted (every link
excluded, each naming its causes), a fan-out of dependents on one retracted fact, and
ties under a multi-value policy (each loser of precedence names a winner). Each output
is held to the bound SPEC states, and its ratio to the log is measured at two sizes to
show it does not grow with n. The large sizes (100k links, 10k ties) run once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gamma import load_policy, parse_events, resolve
from gamma.audit.explain import explain
from gamma.audit.report import report
from gamma.core.terms.model import Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

ACTOR = {"id": "a", "tenant": "t"}
AT = "2027-01-01T00:00:00Z"
MULTIVALUE = load_policy(Path(__file__).resolve().parent.parent / "policies" / "multivalue.toml")
START = datetime(2026, 1, 1, tzinfo=UTC)

# The bounds of SPEC §5: output bytes <= FACTOR * log bytes + SLACK.
RESOLVE = {"json": (6, 1024), "text": (6, 1024), "context": (2, 1024)}
EXPLAIN = {"json": (8, 16384), "text": (8, 16384)}
REPORT = (64, 65536)


def _ts(i: int) -> str:
    return (START + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _assert(i: int, **extra: object) -> dict[str, object]:
    return {"id": f"e{i}", "ts": _ts(i), "actor": "w", "tenant": "t", "type": "assert",
            "fact": f"F{i}", "key": f"k{i}", "value": i, **extra}


def chain(n: int) -> list[dict[str, object]]:
    """F(i) depends on F(i-1); F0 is retracted, so every link is excluded."""
    lines = [_assert(i, **({"depends_on": [f"F{i - 1}"]} if i else {})) for i in range(n)]
    return [*lines, {"id": "r", "ts": _ts(n), "actor": "w", "tenant": "t", "type": "retract", "fact": "F0"}]


def fan(n: int) -> list[dict[str, object]]:
    """n - 1 facts depend on F0, which is retracted."""
    lines = [_assert(i, **({"depends_on": ["F0"]} if i else {})) for i in range(n)]
    return [*lines, {"id": "r", "ts": _ts(n), "actor": "w", "tenant": "t", "type": "retract", "fact": "F0"}]


def ties(n: int) -> list[dict[str, object]]:
    """One key: n/2 tied peers (all admitted under multivalue) and n/2 subordinates they outrank."""
    return [{**_assert(i, key="k"), **({"authority": "subordinate"} if i % 2 else {})} for i in range(n)]


def uses(n: int) -> list[dict[str, object]]:
    """F0 depends on n/2 retracted facts, and n/2 experiences use F0: the experiences' reasons
    must not repeat every origin's events (N × k)."""
    half = n // 2
    deps = [_assert(i + 1) for i in range(half)]
    retracts = [{"id": f"r{i + 1}", "ts": _ts(half + 1), "actor": "w", "tenant": "t",
                 "type": "retract", "fact": f"F{i + 1}"} for i in range(half)]
    root = _assert(0, depends_on=[f"F{i + 1}" for i in range(half)])
    root["ts"] = _ts(half)
    used = [{"id": f"x{i}", "ts": _ts(half + 2), "actor": "w", "tenant": "t", "type": "experience",
             "experience": f"X{i}", "content": "c", "uses": ["F0"]} for i in range(half)]
    return [*deps, root, *retracts, *used]


SHAPES: dict[str, tuple[Callable[[int], list[dict[str, object]]], Policy, str]] = {
    "chain": (chain, DEFAULT_POLICY, "tip"),
    "fan": (fan, DEFAULT_POLICY, "F0"),
    "ties": (ties, MULTIVALUE, "F1"),
    "uses": (uses, DEFAULT_POLICY, "F0"),
}


def build(shape: str, n: int) -> tuple[tuple[Event, ...], int, Policy, str]:
    make, policy, fact = SHAPES[shape]
    text = "".join(json.dumps(line) + "\n" for line in make(n))
    events = tuple(parse_events(text.splitlines(), policy=policy))
    return events, len(text.encode("utf-8")), policy, f"F{n - 1}" if fact == "tip" else fact


def _within(size: int, log: int, bound: tuple[int, int], what: str) -> float:
    factor, slack = bound
    assert size <= factor * log + slack, f"{what}: {size} bytes for a {log}-byte log"
    return size / log


def _ratios(shape: str, n: int) -> dict[str, float]:
    events, log, policy, fact = build(shape, n)
    res = resolve(events, ACTOR, AT, policy)
    out = {f: _within(len(res.to_json().encode() if f == "json" else res.render(f).encode()), log, b,
                      f"{shape} resolve {f}") for f, b in RESOLVE.items()}
    ex = explain(events, fact, ACTOR, AT, policy=policy, resolution=res)
    out["explain json"] = _within(len(ex.to_json().encode()), log, EXPLAIN["json"], f"{shape} explain")
    out["explain text"] = _within(len(ex.render().encode()), log, EXPLAIN["text"], f"{shape} explain")
    page = report(events, ACTOR, AT, policy=policy, auditor=True)
    out["report"] = _within(len(page.encode()), log, REPORT, f"{shape} report")
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_outputs_stay_linear_in_the_log(shape: str) -> None:
    """Within the bound at two sizes, and the ratio to the log does not grow with n
    (a quadratic output would multiply it by about four here)."""
    small, large = _ratios(shape, 300), _ratios(shape, 1200)
    for what, ratio in large.items():
        assert ratio <= small[what] * 1.1 + 0.05, (what, small[what], ratio)


def test_large_chains_fans_and_ties_resolve_and_explain() -> None:
    """100k-link chain and fan-out, 10k ties: within the bounds, no RecursionError."""
    for shape, n in (("chain", 100_000), ("fan", 100_000), ("ties", 10_000)):
        events, log, policy, fact = build(shape, n)
        res = resolve(events, ACTOR, AT, policy)
        _within(len(res.to_json_bytes()), log, RESOLVE["json"], f"{shape} resolve")
        if shape == "chain":  # the tip: every ancestor once, a verified fix found
            ex = explain(events, fact, ACTOR, AT, policy=policy, resolution=res)
            assert len(ex.upstream) == n - 2 and ex.changes and ex.complete
            _within(len(ex.render().encode()), log, EXPLAIN["text"], "chain explain")
