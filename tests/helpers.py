"""Small builders for events, logs and actors, shared by the core tests.

Builders return plain event dicts (the JSON a writer would put on a line);
``log`` numbers them, stamps the missing ``id``/``ts``/``actor``/``tenant``
and parses them through the real validator, so every test log is a valid log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gamma import (
    Actor,
    Event,
    Excluded,
    Policy,
    Resolution,
    parse_actor,
    parse_events,
    resolve,
)
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.policy import DEFAULT_POLICY

__all__ = [
    "AT",
    "T0",
    "TENANT",
    "A",
    "G",
    "P",
    "R",
    "V",
    "X",
    "actor",
    "admitted_ids",
    "codes",
    "excluded_ids",
    "ignored_set",
    "jsonl",
    "log",
    "parse_lines",
    "reason",
    "run",
    "stamp",
    "ts",
    "verdict_of",
]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
"""Event number ``n`` of a ``log`` is stamped ``T0 + n minutes`` unless it says otherwise."""

AT = "2026-03-02T00:00:00Z"
"""A resolution time after every auto-stamped event."""

TENANT = "acme"


def ts(minutes: float) -> str:
    """``T0 + minutes`` as an RFC 3339 UTC timestamp (the printed form)."""
    return format_ts(T0 + timedelta(minutes=minutes))


def A(fact: str, key: str, value: Any, **kw: Any) -> dict[str, Any]:
    """An ``assert`` event dict."""
    return {"type": "assert", "fact": fact, "key": key, "value": value, **kw}


def R(fact: str, **kw: Any) -> dict[str, Any]:
    """A ``retract`` event dict."""
    return {"type": "retract", "fact": fact, **kw}


def P(fact: str, **kw: Any) -> dict[str, Any]:
    """A ``promote`` event dict."""
    return {"type": "promote", "fact": fact, **kw}


def G(**kw: Any) -> dict[str, Any]:
    """A ``grant`` event dict (give ``fact`` or ``key``, and ``role`` or ``to_actor``)."""
    return {"type": "grant", **kw}


def V(**kw: Any) -> dict[str, Any]:
    """A ``revoke`` event dict (give ``fact`` or ``key``, and ``role`` or ``to_actor``)."""
    return {"type": "revoke", **kw}


def X(experience: str, uses: Iterable[str] = (), **kw: Any) -> dict[str, Any]:
    """An ``experience`` event dict."""
    body: dict[str, Any] = {"type": "experience", "experience": experience, "uses": list(uses)}
    body.setdefault("content", f"experience {experience}")
    body.update(kw)
    return body


def stamp(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fill ``id`` (``e<n>``), ``ts`` (``T0 + n`` minutes), ``actor`` and ``tenant`` where absent."""
    out = []
    for n, event in enumerate(events, start=1):
        body = {"id": f"e{n}", "ts": ts(n), "actor": "writer", "tenant": TENANT}
        body.update(event)
        out.append(body)
    return out


def jsonl(*events: Mapping[str, Any]) -> str:
    """The stamped events as JSON Lines text (one event a line, trailing newline)."""
    return "".join(json.dumps(e) + "\n" for e in stamp(events))


def parse_lines(lines: Iterable[str], *, policy: Policy = DEFAULT_POLICY) -> tuple[Event, ...]:
    """Parse raw JSONL lines through the real validator (source ``test.jsonl``)."""
    return parse_events(list(lines), policy=policy, source="test.jsonl")


def log(*events: Mapping[str, Any], policy: Policy = DEFAULT_POLICY) -> tuple[Event, ...]:
    """Stamp and validate event dicts into a log."""
    return parse_lines(jsonl(*events).split("\n"), policy=policy)


def actor(
    id: str = "alice", tenant: str = TENANT, *, policy: Policy = DEFAULT_POLICY, **kw: Any
) -> Actor:
    """A normalised actor (defaults: alice of acme, no roles, default clearance, global)."""
    return parse_actor({"id": id, "tenant": tenant, **kw}, policy=policy)


def run(
    *events: Mapping[str, Any],
    at: str = AT,
    who: Actor | None = None,
    policy: Policy = DEFAULT_POLICY,
) -> Resolution:
    """Stamp, validate and resolve ``events`` for ``who`` (default: ``actor()``) at ``at``."""
    return resolve(log(*events, policy=policy), who or actor(policy=policy), at, policy)


def _excluded(res: Resolution, fact: str) -> Excluded:
    found = res.excluded_fact(fact)
    assert found is not None, f"{fact} is not excluded (admitted: {admitted_ids(res)})"
    return found


def codes(res: Resolution, fact: str) -> tuple[str, ...]:
    """The exclusion codes of ``fact`` (empty when admitted)."""
    found = res.excluded_fact(fact)
    return () if found is None else found.codes


def reason(res: Resolution, fact: str, code: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(events, facts)`` of the ``code`` reason of the excluded ``fact``."""
    for item in _excluded(res, fact).reasons:
        if item.code == code:
            return item.events, item.facts
    raise AssertionError(f"{fact} has no {code} reason: {codes(res, fact)}")


def admitted_ids(res: Resolution) -> list[str]:
    return [a.fact for a in res.admitted]


def excluded_ids(res: Resolution) -> list[str]:
    return [x.fact for x in res.excluded]


def ignored_set(res: Resolution) -> set[tuple[str, str, str]]:
    return {(i.event, i.code, i.fact) for i in res.ignored}


def verdict_of(res: Resolution, experience: str) -> tuple[str, dict[str, str]]:
    """``(verdict, bindings)`` of one experience."""
    for v in res.experiences:
        if v.experience == experience:
            return v.verdict, dict(v.bindings)
    raise AssertionError(f"no experience {experience}")
