"""A deterministic synthetic event-log generator for benchmarks.

``lines(n, seed)`` yields ``n`` JSON Lines of a valid gamma log: the same
``(n, seed)`` always gives the same bytes (``random.Random(seed)``, no clock,
no hash-seed dependence). The mix is meant to look like a real agent memory
and to exercise every event type and every reason code for the probe actor
(``PROBE_ACTOR``, tenant ``acme``, scope ``helios/launch``):

* four tenants of unequal size (``acme`` about half the log): other tenants'
  facts give ``tenant_isolation``;
* scopes ``global``, ``helios``, ``helios/launch``, ``helios/pricing``,
  ``apollo``, ``apollo/eu``: ``out_of_scope``, ``overridden``;
* keys: a pool that grows with ``n`` (``n // 50`` per tenant, at least 64)
  plus 16 hot keys that take 15% of the asserts, so hot keys accumulate long
  revision histories as ``n`` grows;
* asserts with random authority (half unwritten): supersession by same key
  and by explicit ``supersedes`` (some with insufficient authority:
  ``ignored``), ``outranked``;
* drafts and hypotheticals, some promoted later (some promotes with too little
  authority); retracts (some with too little authority);
* ``valid_from`` in the past of the probe (a deferred effect) or after it
  (``not_yet_valid``); ``valid_until`` before the probe (``expired``) or after;
* visibility by role, by actor and by clearance (``access_denied``), grants
  and revokes by fact and by key, to roles and to actors;
* dependency chains (``depends_on`` the tail of one of 64 per-tenant chains,
  at most 32 links deep, sometimes with a second, random recent input):
  ``dependency_invalidated``, ``dependency_restricted``;
* experiences using 1-3 earlier facts with every applicability.

Every reference names an earlier fact of the same tenant, ids are unique and
``ts`` never decreases, so ``gamma.parse_events`` accepts the whole log.

Command line: ``python benchmarks/synth.py --events N [--seed S] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["BASE_TS", "PROBE_ACTOR", "generate", "last_ts", "lines", "probe_time"]

BASE_TS = datetime(2026, 1, 1, tzinfo=UTC)

#: The actor the benchmark resolves for: sees some role-restricted facts, not all.
PROBE_ACTOR: dict[str, Any] = {
    "id": "alice",
    "tenant": "acme",
    "roles": ["sales"],
    "clearance": "internal",
    "scope": "helios/launch",
}

TENANTS = ("acme", "globex", "initech", "umbrella")
TENANT_WEIGHTS = (0.5, 0.2, 0.18, 0.12)
SCOPES = ("global", "helios", "helios/launch", "helios/pricing", "apollo", "apollo/eu")
SCOPE_WEIGHTS = (0.35, 0.2, 0.15, 0.1, 0.12, 0.08)
AUTHORITIES = ("unverified", "system", "subordinate", "peer", "manager", "executive", "policy")
AUTHORITY_WEIGHTS = (0.08, 0.15, 0.17, 0.2, 0.2, 0.13, 0.07)
CLEARANCES = ("public", "internal", "confidential", "secret")
ROLES = ("sales", "hr", "legal", "finance", "ops")
ACTORS = ("alice", "bob", "carol", "dave")
WRITERS = ("crm", "agent-1", "agent-2", "hr-system", "legal-lead", "ceo", "bot")
KINDS = ("fact", "constraint", "commitment", "preference", "rule", "derived")
APPLICABILITIES = ("applicable", "adaptable", "unusable")
HOT_KEYS = 16

# Event mix (type, weight); the assert share is the remainder.
MIX = (
    ("retract", 0.06),
    ("promote", 0.03),
    ("grant", 0.025),
    ("revoke", 0.012),
    ("experience", 0.05),
)
RECENT = 256  # references prefer the tenant's last RECENT facts
CHAINS = 64  # dependency chains kept growing per tenant
CHAIN_MAX = 32  # links per chain before it is replaced by a new one


def _ts(seconds: int) -> str:
    return (BASE_TS + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_ts(n: int) -> datetime:
    """An upper bound of the last event's ``ts`` (each step adds at most 5 s)."""
    return BASE_TS + timedelta(seconds=5 * n)


def probe_time(n: int) -> datetime:
    """The benchmark's t: one hour after any event of an ``n``-event log."""
    return last_ts(n) + timedelta(hours=1)


class _Tenant:
    def __init__(self, name: str, n_keys: int) -> None:
        self.name = name
        self.n_keys = n_keys
        self.facts: list[str] = []  # fact ids in log order
        self.key_of: dict[str, str] = {}
        self.last_of_key: dict[str, str] = {}
        self.uncommitted: list[str] = []  # drafts/hypotheticals not yet promoted
        self.chains: list[tuple[str, int]] = []  # (tail, depth) of dependency chains
        self.fact_grants: list[tuple[str, str, str]] = []  # (fact, field, grantee)
        self.key_grants: list[tuple[str, str, str]] = []  # (key, field, grantee)
        self.n_fact = 0
        self.n_exp = 0


def generate(n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Yield ``n`` events (JSON objects, ``type`` included) of a valid log."""
    rng = random.Random(seed)
    n_keys = max(64, n // 50)
    tenants = [_Tenant(name, n_keys) for name in TENANTS]
    future = last_ts(n) + timedelta(days=30)  # after probe_time(n)
    future_s = int((future - BASE_TS).total_seconds())
    kinds = [k for k, _ in MIX]
    cum = []
    total = 0.0
    for _, weight in MIX:
        total += weight
        cum.append(total)
    clock = 0
    for i in range(n):
        clock += rng.choice((0, 0, 1, 1, 1, 2, 3, 5))
        tenant = rng.choices(tenants, TENANT_WEIGHTS)[0]
        event: dict[str, Any] = {
            "id": f"e{i}",
            "ts": _ts(clock),
            "actor": rng.choice(WRITERS),
            "tenant": tenant.name,
        }
        r = rng.random()
        kind = "assert"
        for name, edge in zip(kinds, cum, strict=True):
            if r < edge:
                kind = name
                break
        if not tenant.facts and kind != "assert":
            kind = "assert"
        body = _BUILDERS[kind](rng, tenant, clock, future_s)
        if body is None:  # nothing suitable to refer to: write an assert instead
            kind = "assert"
            body = _assert(rng, tenant, clock, future_s)
        event["type"] = kind
        event.update(body)
        yield event


def lines(n: int, seed: int = 0) -> Iterator[str]:
    """The events of ``generate(n, seed)`` as JSON Lines text (no newline)."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for event in generate(n, seed):
        yield dumps(event)


# -- builders, one per event type ----------------------------------------------------------


def _authority(rng: random.Random) -> str | None:
    if rng.random() < 0.5:
        return None
    return rng.choices(AUTHORITIES, AUTHORITY_WEIGHTS)[0]


def _pick_fact(rng: random.Random, tenant: _Tenant) -> str:
    facts = tenant.facts
    if len(facts) > RECENT and rng.random() < 0.7:
        return facts[len(facts) - 1 - rng.randrange(RECENT)]
    return facts[rng.randrange(len(facts))]


def _pick_key(rng: random.Random, tenant: _Tenant) -> str:
    if rng.random() < 0.15:
        return f"hot.{rng.randrange(HOT_KEYS)}"
    return f"k{rng.randrange(tenant.n_keys)}"


def _assert(rng: random.Random, tenant: _Tenant, clock: int, future_s: int) -> dict[str, Any]:
    tenant.n_fact += 1
    fact = f"{tenant.name}-F{tenant.n_fact}"
    key = _pick_key(rng, tenant)
    r = rng.random()
    value: Any
    if r < 0.7:
        value = f"value {rng.randrange(10**6)} of {key}"
    elif r < 0.9:
        value = rng.randrange(-(10**9), 10**9)
    else:
        value = rng.random() < 0.5
    body: dict[str, Any] = {"fact": fact, "key": key, "value": value}
    scope = rng.choices(SCOPES, SCOPE_WEIGHTS)[0]
    if scope != "global" or rng.random() < 0.3:
        body["scope"] = scope
    r = rng.random()
    if r < 0.07:
        body["status"] = "draft"
    elif r < 0.10:
        body["status"] = "hypothetical"
    elif r < 0.25:
        body["status"] = "committed"
    authority = _authority(rng)
    if authority is not None:
        body["authority"] = authority
    if rng.random() < 0.2:
        body["kind"] = rng.choice(KINDS)
    if rng.random() < 0.1:
        body["priority"] = rng.choice(("hard", "soft"))
    r = rng.random()
    if r < 0.12:
        vis: dict[str, Any] = {}
        s = rng.random()
        if s < 0.5:
            vis["roles"] = rng.sample(ROLES, rng.randint(1, 2))
        elif s < 0.7:
            vis["actors"] = rng.sample(ACTORS, rng.randint(1, 2))
        elif s < 0.85:
            vis["roles"] = [rng.choice(ROLES)]
            vis["clearance"] = rng.choice(CLEARANCES)
        else:
            vis["clearance"] = rng.choice(CLEARANCES[1:])
        body["visibility"] = vis
    r = rng.random()
    start: int | None = None
    if r < 0.04:
        start = future_s + rng.randrange(86400 * 30)  # not_yet_valid at the probe
    elif r < 0.09:
        start = clock + rng.randint(1, 600)  # deferred effect, due before the probe
    if start is not None:
        body["valid_from"] = _ts(start)
    r = rng.random()
    if r < 0.05:
        lo = max(clock, start or 0)
        body["valid_until"] = _ts(lo + rng.randint(1, 3600))  # expired at the probe
    elif r < 0.08:
        lo = max(future_s, start or 0)
        body["valid_until"] = _ts(lo + 86400 * rng.randint(60, 365))
    if tenant.facts:
        r = rng.random()
        if r < 0.10:
            # extend (or start) a dependency chain, sometimes with a second input
            if tenant.chains and rng.random() < 0.8:
                index = rng.randrange(len(tenant.chains))
                tail, depth = tenant.chains[index]
                if depth < CHAIN_MAX:
                    deps = [tail]
                    tenant.chains[index] = (fact, depth + 1)
                else:  # the chain is long enough: start a new one in its place
                    deps = [_pick_fact(rng, tenant)]
                    tenant.chains[index] = (fact, 1)
            else:
                deps = [_pick_fact(rng, tenant)]
                if len(tenant.chains) < CHAINS:
                    tenant.chains.append((fact, 1))
            if rng.random() < 0.3:
                extra = _pick_fact(rng, tenant)
                if extra not in deps:
                    deps.append(extra)
            body["depends_on"] = deps
            body["kind"] = "derived"
        if rng.random() < 0.05:
            previous = tenant.last_of_key.get(key)
            target = (
                previous if previous is not None and rng.random() < 0.8 else _pick_fact(rng, tenant)
            )
            body["supersedes"] = [target]
    tenant.facts.append(fact)
    tenant.key_of[fact] = key
    tenant.last_of_key[key] = fact
    if body.get("status") in ("draft", "hypothetical"):
        tenant.uncommitted.append(fact)
    return body


def _retract(rng: random.Random, tenant: _Tenant, clock: int, future_s: int) -> dict[str, Any]:
    body: dict[str, Any] = {"fact": _pick_fact(rng, tenant)}
    authority = _authority(rng)
    if authority is not None:
        body["authority"] = authority
    if rng.random() < 0.4:
        body["reason"] = rng.choice(("outdated", "typo", "customer asked", "duplicate"))
    return body


def _promote(
    rng: random.Random, tenant: _Tenant, clock: int, future_s: int
) -> dict[str, Any] | None:
    if tenant.uncommitted and rng.random() < 0.9:
        fact = tenant.uncommitted.pop(rng.randrange(len(tenant.uncommitted)))
    else:
        fact = _pick_fact(rng, tenant)  # often already committed: no effect
    body: dict[str, Any] = {"fact": fact}
    authority = _authority(rng)
    if authority is not None:
        body["authority"] = authority
    return body


def _grantee(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.6:
        return "role", rng.choice(ROLES)
    return "to_actor", rng.choice(ACTORS)


def _grant(rng: random.Random, tenant: _Tenant, clock: int, future_s: int) -> dict[str, Any]:
    field, grantee = _grantee(rng)
    body: dict[str, Any]
    if rng.random() < 0.6:
        fact = _pick_fact(rng, tenant)
        body = {"fact": fact, field: grantee}
        tenant.fact_grants.append((fact, field, grantee))
    else:
        key = _pick_key(rng, tenant)
        body = {"key": key, field: grantee}
        tenant.key_grants.append((key, field, grantee))
    authority = _authority(rng)
    if authority is not None:
        body["authority"] = authority
    return body


def _revoke(rng: random.Random, tenant: _Tenant, clock: int, future_s: int) -> dict[str, Any]:
    # mostly revoke an earlier grant; sometimes something never granted (no effect)
    body: dict[str, Any]
    r = rng.random()
    if r < 0.45 and tenant.fact_grants:
        fact, field, grantee = tenant.fact_grants[rng.randrange(len(tenant.fact_grants))]
        body = {"fact": fact, field: grantee}
    elif r < 0.8 and tenant.key_grants:
        key, field, grantee = tenant.key_grants[rng.randrange(len(tenant.key_grants))]
        body = {"key": key, field: grantee}
    else:
        field, grantee = _grantee(rng)
        body = {"fact": _pick_fact(rng, tenant), field: grantee}
    authority = _authority(rng)
    if authority is not None:
        body["authority"] = authority
    return body


def _experience(rng: random.Random, tenant: _Tenant, clock: int, future_s: int) -> dict[str, Any]:
    tenant.n_exp += 1
    uses: list[str] = []
    for _ in range(rng.randint(1, 3)):
        fact = _pick_fact(rng, tenant)
        if fact not in uses:
            uses.append(fact)
    body: dict[str, Any] = {
        "experience": f"{tenant.name}-X{tenant.n_exp}",
        "content": f"Acted on {', '.join(uses)} for case {rng.randrange(10**5)}.",
    }
    if rng.random() < 0.95:
        body["uses"] = uses
    if rng.random() < 0.6:
        body["applicability"] = rng.choices(APPLICABILITIES, (0.6, 0.3, 0.1))[0]
    return body


_BUILDERS = {
    "assert": _assert,
    "retract": _retract,
    "promote": _promote,
    "grant": _grant,
    "revoke": _revoke,
    "experience": _experience,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", "-n", type=int, required=True, help="number of events")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="-", help="output file (default stdout)")
    args = parser.parse_args(argv)
    if args.out != "-":
        with open(args.out, "w", encoding="utf-8") as out:
            _write(out, args.events, args.seed)
        return 0
    try:
        _write(sys.stdout, args.events, args.seed)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    return 0


def _write(out: Any, n: int, seed: int) -> None:
    for line in lines(n, seed):
        out.write(line + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
