"""A deterministic many-tenant log and its actors, for access reviews (tests and benchmarks).

``log(n, tenants, actors, seed)`` returns ``(lines, actor_objects)``: ``n`` JSON Lines of a
valid log spread over ``tenants`` tenants (unequal sizes), and ``actors`` actor objects spread
over the same tenants. Asserts carry role, actor and clearance visibility; grants, revokes,
retracts and superseding asserts name earlier facts of the same tenant.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

ROLES = ("sales", "hr", "legal", "finance", "ops")
CLEARANCES = ("public", "internal", "confidential", "secret")
SCOPES = ("global", "helios", "helios/launch", "apollo")
BASE = datetime(2026, 3, 1, tzinfo=UTC)


def ts(i: int) -> str:
    """The timestamp of event ``i`` (one second apart)."""
    return (BASE + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(n: int, tenants: int, actors: int, seed: int = 0) -> tuple[list[str], list[dict[str, Any]]]:
    rng = random.Random(seed)
    names = [f"t{i:04d}" for i in range(tenants)]
    weights = [1.0 / (1 + i % 7) for i in range(tenants)]
    people: dict[str, list[str]] = {t: [] for t in names}
    actor_objs: list[dict[str, Any]] = []
    for i in range(actors):
        tenant = names[i % tenants]
        aid = f"{tenant}-u{i // tenants}"
        people[tenant].append(aid)
        actor_objs.append({
            "id": aid, "tenant": tenant,
            "roles": sorted(rng.sample(ROLES, rng.randint(0, 2))),
            "clearance": rng.choice(CLEARANCES),
            "scope": rng.choice(("global", "helios/launch", "apollo")),
        })  # fmt: skip
    facts: dict[str, list[str]] = {t: [] for t in names}
    out: list[str] = []
    for i in range(n):
        tenant = rng.choices(names, weights)[0]
        base = {"id": f"e{i}", "ts": ts(i), "actor": "crm", "tenant": tenant}
        r = rng.random()
        mine = facts[tenant]
        if r < 0.6 or not mine:
            fact = f"{tenant}-F{len(mine)}"
            body: dict[str, Any] = {"type": "assert", "fact": fact,
                                    "key": f"k{rng.randrange(12)}", "value": f"v{i}"}
            if rng.random() < 0.5:
                body["scope"] = rng.choice(SCOPES)
            s = rng.random()
            if s < 0.2:
                body["visibility"] = {"roles": [rng.choice(ROLES)]}
            elif s < 0.3 and people[tenant]:
                body["visibility"] = {"actors": [rng.choice(people[tenant])]}
            elif s < 0.4:
                body["visibility"] = {"clearance": rng.choice(CLEARANCES[1:])}
            if rng.random() < 0.1 and mine:
                body["depends_on"] = [rng.choice(mine)]
            mine.append(fact)
        elif r < 0.8:
            body = {"type": "grant", "fact": rng.choice(mine)}
            if rng.random() < 0.5 or not people[tenant]:
                body["role"] = rng.choice(ROLES)
            else:
                body["to_actor"] = rng.choice(people[tenant])
        elif r < 0.9:
            body = {"type": "revoke", "fact": rng.choice(mine), "role": rng.choice(ROLES)}
        else:
            body = {"type": "retract", "fact": rng.choice(mine)}
        out.append(json.dumps({**base, **body}, sort_keys=True))
    return out, actor_objs
