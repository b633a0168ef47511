"""Hypothesis strategies for gamma: valid governed logs, actors, probe times, malformed input.

Logs are built as *written* events (the JSON objects a writer puts on a line), so the same
value can be rendered as JSONL, parsed, stored, fed to the naive reference or corrupted.
Alphabets are deliberately tiny (four keys, six scopes, three roles, a dozen values):
keys, scopes and values collide often, which is where supersession, precedence and grants
get interesting, and shrinking ends on logs a person can read line by line.

Every reference in a generated log names an earlier fact of the same tenant, ``ts`` never
decreases, and authority and clearance names come from the policy's own ladders, so every
``Log`` parses; ``logs()`` checks that with ``gamma.parse_events`` before returning it.

With ``erasure=True`` (issue 30, SPEC §21) a log also holds committed values (``value`` with
a ``salt``, sometimes their ``commitment`` and a ``subject``), erased values (``commitment``
alone) and erase events naming committed facts. It is off by default: an erase changes Γ at
times before it (by design), and a committed line's chain bytes are not its canonical JSON,
so properties written for plaintext logs opt in where they hold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import attrs
from hypothesis import strategies as st

from gamma import (
    DEFAULT_POLICY,
    CycleError,
    DuplicateIdError,
    Event,
    InputError,
    JSONSyntaxError,
    MissingFieldError,
    Policy,
    TimestampOrderError,
    UnknownFieldError,
    UnknownReferenceError,
    ValueTypeError,
    load_policy,
    parse_events,
)
from gamma.core.terms.canonical import format_ts, parse_ts

__all__ = [
    "BASE",
    "KEYS",
    "MALFORMATIONS",
    "NAMED_POLICIES",
    "PEOPLE",
    "ROLES",
    "SCOPES",
    "TENANTS",
    "VALUES",
    "BASES",
    "Log",
    "Malformed",
    "commitment_of",
    "erased_form",
    "Scenario",
    "actors",
    "extensions",
    "jsonl",
    "logs",
    "malformed_logs",
    "merge",
    "other_tenant_streams",
    "policies",
    "probe_times",
    "scenarios",
    "written_jsonl",
]

BASE = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANTS = ("acme", "globex")
KEYS = ("k1", "k2", "k3", "odd key")
_KEY_CHOICES = ("k1", "k2", "k1", "k2", "k3", "odd key")  # same-key collisions are the point
# "Dense" logs: one or two keys, every assert scoped and ranked, no expiry, a few deferred
# starts; this is where supersession, outranked and overridden happen most.
_DENSE_KEYS = ("k1", "k1", "k2")
_DENSE_SCOPES = ("global", "a", "a/b", "a/x")
SCOPES = ("global", "a", "a/b", "a/x", "a/b/c", "b")
ROLES = ("r1", "r2", "r3")
PEOPLE = ("alice", "bob", "carol")
VALUES: tuple[str | int | bool, ...] = (
    "v1",
    "v2",
    "v3",
    7,
    42,
    True,
    False,
    "",
    "two\nlines",
    "## Binding",
    '"quoted"',
    "ünï",
    "line\u2028sep",
    "rtl\u202eevil",
)
_STATUSES = ("draft", "hypothetical", "committed")
_KINDS = ("fact", "constraint", "commitment", "preference", "rule", "derived")
_APPLICABILITIES = ("applicable", "adaptable", "unusable")

_POLICY_DIR = Path(__file__).resolve().parent.parent / "policies"
NAMED_POLICIES: dict[str, Policy] = {
    path.stem: load_policy(path) for path in sorted(_POLICY_DIR.glob("*.toml"))
}
# Different ladder names and lengths: catches code that assumes the default's names.
CUSTOM_POLICY = Policy(
    authority_ladder=("low", "mid", "high"),
    authority_default="mid",
    clearance_ladder=("open", "closed"),
    clearance_default="open",
)

# Steps between consecutive ``ts``: equal timestamps are frequent, sub-second ones happen.
_STEPS = (
    timedelta(minutes=1),
    timedelta(0),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(microseconds=500_000),
)
# Offsets of valid_from / valid_until from the event's own ts (minutes).
_VALID_OFFSETS = (1, 0, -1, 3, 10, -10, 60)
_VALID_SPANS = (1, 2, 10, 60)

_DEFERRALS = (1, 3, 10)

# Absent (the field is not written) is the common case and the one shrinking goes to.
_sometimes = st.sampled_from((False, False, True))
_rarely = st.sampled_from((False, False, False, True))


def _maybe(draw: st.DrawFn, strategy: st.SearchStrategy[Any]) -> Any:
    return draw(strategy) if draw(_sometimes) else None


def _put(body: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        body[name] = value


# -- values that carry their own readable repr -----------------------------------------


def jsonl(lines: Iterable[dict[str, Any]]) -> str:
    """Compact JSON Lines, one object per line, newline-terminated."""
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def describe_policy(policy: Policy) -> str:
    """The policy as its name, or as the switches that differ from the default."""
    for name, named in NAMED_POLICIES.items():
        if named == policy:
            return name
    if policy == CUSTOM_POLICY:
        return "custom"
    base = (
        CUSTOM_POLICY
        if policy.authority_ladder == CUSTOM_POLICY.authority_ladder
        else DEFAULT_POLICY
    )
    label = "custom" if base is CUSTOM_POLICY else "default"
    changed = [
        f"{field.name}={getattr(policy, field.name)!r}"
        for field in attrs.fields(Policy)
        if field.init and getattr(policy, field.name) != getattr(base, field.name)
    ]
    return f"{label}({', '.join(changed)})"


@attrs.frozen(eq=False)
class Log:
    """A generated, valid event log: the written events in order, and the parsed events."""

    lines: tuple[dict[str, Any], ...]
    policy: Policy
    events: tuple[Event, ...]

    @classmethod
    def of(cls, lines: Iterable[dict[str, Any]], policy: Policy) -> Log:
        lines = tuple(lines)
        return cls(lines, policy, parse_events(jsonl(lines).split("\n"), policy=policy))

    def text(self) -> str:
        return jsonl(self.lines)

    def tenants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(line["tenant"] for line in self.lines))

    def erased_facts(self) -> dict[str, str]:
        """Fact -> the erase event naming it, over the whole log."""
        return {
            item["fact"]: line["id"]
            for line in self.lines
            if line["type"] == "erase"
            for item in line["erased"]
        }

    def as_erased(self) -> Log:
        """The log as a committed store holds it after its erasures: each erased fact's line
        in its erased form (SPEC §21; the same chain bytes)."""
        gone = self.erased_facts()
        return Log.of(
            (erased_form(line) if line["type"] == "assert" and line["fact"] in gone else line
             for line in self.lines),
            self.policy,
        )

    def last_ts(self) -> datetime:
        return max((parse_ts(line["ts"]) for line in self.lines), default=BASE)

    def prefix(self, at: datetime) -> Log:
        """H_t: the longest prefix whose events have ``ts <= at``."""
        count = 0
        for line in self.lines:
            if parse_ts(line["ts"]) > at:
                break
            count += 1
        return Log(self.lines[:count], self.policy, self.events[:count])

    def only(self, tenant: str) -> Log:
        return Log.of((line for line in self.lines if line["tenant"] == tenant), self.policy)

    def __add__(self, other: Log) -> Log:
        return Log(self.lines + other.lines, self.policy, self.events + other.events)

    def __repr__(self) -> str:
        body = "".join(f"\n    {json.dumps(line, ensure_ascii=False)}" for line in self.lines)
        return f"Log(policy={describe_policy(self.policy)}, lines=[{body}\n])"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # Hypothesis prints falsifying examples with this


@attrs.frozen(eq=False)
class Scenario:
    """One question put to Γ: a log, an actor and a probe time."""

    log: Log
    actor: dict[str, Any]
    at: datetime

    @property
    def policy(self) -> Policy:
        return self.log.policy

    def __repr__(self) -> str:
        return (
            f"Scenario(\n  actor={json.dumps(self.actor)},\n  at={format_ts(self.at)},\n"
            f"  log={self.log!r})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


# -- policies --------------------------------------------------------------------------


@st.composite
def policies(
    draw: st.DrawFn, *, dependency_mode: Literal["exclude", "flag", "recompute"] | None = None
) -> Policy:
    """A named policy (default, strict, recheck, multivalue), a custom ladder, or variations."""
    base = draw(st.sampled_from((DEFAULT_POLICY, *NAMED_POLICIES.values(), CUSTOM_POLICY)))
    if draw(_sometimes):
        base = attrs.evolve(
            base,
            authority_default=draw(st.sampled_from(base.authority_ladder)),
            clearance_default=draw(st.sampled_from(base.clearance_ladder)),
            same_key=draw(st.booleans()),
            dependency_mode=draw(st.sampled_from(("exclude", "flag", "recompute"))),
            restricted_keys=draw(st.booleans()),
        )
    if dependency_mode is not None and base.dependency_mode != dependency_mode:
        base = attrs.evolve(base, dependency_mode=dependency_mode)
    return _trusting_generator(base)


def _trusting_generator(policy: Policy) -> Policy:
    """The policy with the generator's one writer ``w`` holding the top level, so logs that
    claim any authority stay valid under a policy binding writers (strict.toml)."""
    if policy.writer_rank("w") == len(policy.authority_ladder) - 1:
        return policy
    top = policy.authority_ladder[-1]
    return attrs.evolve(policy, writers=tuple(sorted((*policy.writers, ("w", top)))))


# -- the log builder -------------------------------------------------------------------


@attrs.define
class _Builder:
    """What generation needs to know about the log written so far."""

    policy: Policy
    tenants: tuple[str, ...]
    prefix: str
    palette: tuple[str, ...]
    dense: bool = False
    erasure: bool = False  # committed and erased values, erase events (issue 30)
    lines: list[dict[str, Any]] = attrs.Factory(list)
    facts: dict[str, list[tuple[str, str]]] = attrs.Factory(dict)  # tenant -> [(fact, key)]
    # tenant -> fact -> commitment, of the committed facts no erase names yet
    erasable: dict[str, dict[str, str]] = attrs.Factory(dict)
    used_ids: set[str] = attrs.Factory(set)
    ts: datetime = BASE

    @classmethod
    def resume(
        cls,
        log: Log,
        *,
        tenants: Sequence[str],
        prefix: str,
        palette: Sequence[str],
        dense: bool = False,
        erasure: bool = False,
    ) -> _Builder:
        builder = cls(
            log.policy, tuple(tenants), prefix, tuple(palette), dense, erasure, ts=log.last_ts()
        )
        for line in log.lines:
            builder.record(line)
        builder.lines.clear()
        return builder

    def fresh(self, letter: str) -> str:
        number = 1
        while f"{self.prefix}{letter}{number}" in self.used_ids:
            number += 1
        name = f"{self.prefix}{letter}{number}"
        self.used_ids.add(name)
        return name

    def record(self, line: dict[str, Any]) -> None:
        self.lines.append(line)
        for field in ("id", "fact", "experience"):
            if field in line and (field != "fact" or line["type"] == "assert"):
                self.used_ids.add(line[field])
        if line["type"] == "assert":
            self.facts.setdefault(line["tenant"], []).append((line["fact"], line["key"]))
            committed = commitment_of(line)
            if committed is not None:
                self.erasable.setdefault(line["tenant"], {})[line["fact"]] = committed
        elif line["type"] == "erase":
            for item in line["erased"]:
                self.erasable[line["tenant"]].pop(item["fact"], None)
        self.ts = max(self.ts, parse_ts(line["ts"]))


def _visibility(draw: st.DrawFn, policy: Policy) -> dict[str, Any]:
    """Usually a restriction; sometimes ``{}``, which restricts nothing (an empty list is an
    input error)."""
    body: dict[str, Any] = {}
    _put(body, "roles", _maybe(draw, st.lists(st.sampled_from(ROLES), min_size=1, max_size=2)))
    _put(body, "actors", _maybe(draw, st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=2)))
    _put(body, "clearance", _maybe(draw, st.sampled_from(policy.clearance_ladder)))
    if not body and draw(st.booleans()):
        body["roles"] = [draw(st.sampled_from(ROLES))]
    return body


def _draw_event(
    draw: st.DrawFn,
    b: _Builder,
    *,
    after: datetime | None = None,
    authority: st.SearchStrategy[str] | None = None,
) -> dict[str, Any]:
    """One valid event appended to ``b``; ``authority`` forces an explicit authority."""
    ts = b.ts + draw(st.sampled_from(_STEPS))
    if after is not None and ts <= after:
        ts = after + draw(st.sampled_from((timedelta(minutes=1), timedelta(microseconds=1))))
    tenant = draw(st.sampled_from(b.tenants))
    known = b.facts.get(tenant, [])
    types = ["assert", "assert", "assert", "experience", "grant", "revoke"]
    if known and b.dense:
        types += ["assert", "assert", "assert", "retract", "promote", "experience"]
    elif known:
        types += [
            "assert",
            "assert",
            "retract",
            "retract",
            "promote",
            "grant",
            "revoke",
            "experience",
        ]
    if b.erasure and b.erasable.get(tenant):
        types += ["erase", "erase", "erase"]
    kind = draw(st.sampled_from(types))
    line: dict[str, Any] = {
        "id": b.fresh("e"),
        "type": kind,
        "ts": format_ts(ts),
        "actor": "w",
        "tenant": tenant,
    }

    def auth() -> str | None:
        if authority is not None:
            return draw(authority)
        if b.dense or draw(st.booleans()):
            return draw(st.sampled_from(b.palette))
        return None

    known_ids = [fact for fact, _ in known]
    if kind == "assert":
        key = draw(st.sampled_from(_DENSE_KEYS if b.dense else _KEY_CHOICES))
        line["fact"] = b.fresh("F")
        line["key"] = key
        line["value"] = draw(st.sampled_from(VALUES))
        if b.dense:
            line["scope"] = draw(st.sampled_from(_DENSE_SCOPES))
        else:
            _put(line, "scope", _maybe(draw, st.sampled_from(SCOPES)))
        _put(line, "status", _maybe(draw, st.sampled_from(_STATUSES)))
        _put(line, "authority", auth())
        _put(line, "kind", _maybe(draw, st.sampled_from(_KINDS)))
        _put(line, "priority", _maybe(draw, st.sampled_from(("hard", "soft"))))
        if draw(_sometimes):
            line["visibility"] = _visibility(draw, b.policy)
        start: datetime | None = None
        if b.dense and draw(_rarely):  # a deferred effect: it supersedes when it starts
            start = ts + timedelta(minutes=draw(st.sampled_from(_DEFERRALS)))
            line["valid_from"] = format_ts(start)
        elif not b.dense and draw(_sometimes):
            start = ts + timedelta(minutes=draw(st.sampled_from(_VALID_OFFSETS)))
            line["valid_from"] = format_ts(start)
        if not b.dense and draw(_sometimes):
            if start is None:
                end = ts + timedelta(minutes=draw(st.sampled_from(_VALID_OFFSETS)))
            else:
                end = start + timedelta(minutes=draw(st.sampled_from(_VALID_SPANS)))
            line["valid_until"] = format_ts(end)
        if known_ids:
            same_key = [fact for fact, k in known if k == key] or known_ids
            _put(
                line,
                "supersedes",
                _maybe(draw, st.lists(st.sampled_from(same_key), min_size=1, max_size=2)),
            )
            _put(
                line,
                "depends_on",
                _maybe(draw, st.lists(st.sampled_from(known_ids), min_size=1, max_size=2)),
            )
            if "depends_on" in line and draw(_sometimes):
                _derive(draw, line, dict(known))
        if b.erasure:
            _commit(draw, line)
    elif kind == "erase":
        erasable = b.erasable[tenant]
        named = draw(st.lists(st.sampled_from(sorted(erasable)), min_size=1, max_size=2, unique=True))
        line["erased"] = [{"fact": fact, "commitment": erasable[fact]} for fact in named]
        line["basis"] = draw(st.sampled_from(BASES))
    elif kind in ("retract", "promote"):
        line["fact"] = draw(st.sampled_from(known_ids))
        _put(line, "authority", auth())
        if kind == "retract":
            _put(line, "reason", _maybe(draw, st.just("no longer true")))
    elif kind in ("grant", "revoke"):
        if draw(st.booleans()) and known_ids:
            line["fact"] = draw(st.sampled_from(known_ids))
        else:
            line["key"] = draw(st.sampled_from(_KEY_CHOICES))
        if draw(st.booleans()):
            line["role"] = draw(st.sampled_from(ROLES))
        else:
            line["to_actor"] = draw(st.sampled_from(PEOPLE))
        _put(line, "authority", auth())
    else:
        line["experience"] = b.fresh("X")
        line["content"] = "acted on it"
        if known_ids:
            # duplicates allowed: nothing in the format forbids listing a fact twice
            _put(
                line,
                "uses",
                _maybe(draw, st.lists(st.sampled_from(known_ids), min_size=1, max_size=3)),
            )
            if "uses" not in line and draw(st.booleans()):
                line["uses"] = [draw(st.sampled_from(known_ids))]
        _put(line, "applicability", _maybe(draw, st.sampled_from(_APPLICABILITIES)))
    b.record(line)
    return line


#: Legal bases of generated erase events.
BASES = ("GDPR Art. 17(1)(a)", "CCPA 1798.105", "consent withdrawn")
#: Subjects of generated committed values.
_SUBJECTS = ("alice", "bob", "carol")


def commitment_of(line: dict[str, Any]) -> str | None:
    """SPEC §21, computed independently: a written assert's commitment (SHA-256 of the salt's
    bytes and the value's canonical JSON), or None for a plaintext one."""
    if "salt" in line:
        value = json.dumps(line["value"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(bytes.fromhex(line["salt"]) + value.encode("utf-8")).hexdigest()
    found: str | None = line.get("commitment")
    return found


def erased_form(line: dict[str, Any]) -> dict[str, Any]:
    """A committed assert's line with its value and salt gone (its commitment kept)."""
    body = {name: item for name, item in line.items() if name not in ("value", "salt")}
    committed = commitment_of(line)
    assert committed is not None, line
    body["commitment"] = committed
    return body


def _commit(draw: st.DrawFn, line: dict[str, Any]) -> None:
    """Sometimes make a generated assert's value committed (a salt made from its fact id:
    generation stays deterministic), its commitment written or not, or erased already."""
    form = draw(st.sampled_from(("plain", "plain", "committed", "committed", "erased")))
    if form == "plain":
        return
    line["salt"] = hashlib.sha256(f"salt of {line['fact']}".encode()).hexdigest()
    if draw(st.booleans()):
        line["commitment"] = commitment_of(line)
    if draw(_sometimes):
        line["subject"] = draw(st.sampled_from(_SUBJECTS))
    if form == "erased":
        line.update(erased_form(line))
        del line["value"], line["salt"]


#: Derivations of generated derived facts ({0}, {1}: the first and last input), over the
#: generator's values: numbers compute, text and booleans mostly fail as type mismatches.
DERIVATIONS = (
    "{0} * 2",
    "{0} + {1}",
    "{0} - {1} * 30%",
    "{0} / {1}",
    "round({0} / 3, 2)",
    "max({0}, {1}, 10)",
    'if({0} > 10, {1}, "low")',
    "{0} == {1}",
)


def _derive(draw: st.DrawFn, line: dict[str, Any], keys: dict[str, str]) -> None:
    """Make ``line`` a derived fact stating a derivation over its ``depends_on`` (an input
    named by its fact id, or by its key when no other dependency holds that key)."""
    deps = line["depends_on"]

    def name(fact: str) -> str:
        holders = [d for d in dict.fromkeys(deps) if keys[d] == keys[fact]]
        return keys[fact] if len(holders) == 1 and draw(st.booleans()) else fact

    template = draw(st.sampled_from(DERIVATIONS))
    first, last = name(deps[0]), name(deps[-1])
    line["kind"] = "derived"
    line["value"] = draw(st.sampled_from((14, 20, *VALUES[3:5])))
    line["derivation"] = template.replace("{0}", "{" + first + "}").replace("{1}", "{" + last + "}")


# "One more event?" asked before each event, as hypothesis' own lists do: deleting an event
# while shrinking is then one contiguous cut of choices (a size drawn up front would have to
# change too), so counterexamples shrink to the few events that matter. Nine in ten: about
# eight events per log under the cap of twelve.
_MORE = st.sampled_from((False, *(True,) * 9))


def _events(draw: st.DrawFn, min_size: int, max_size: int) -> Iterator[int]:
    count = 0
    while count < max_size and (count < min_size or draw(_MORE)):
        yield count
        count += 1


def _palette(draw: st.DrawFn, policy: Policy) -> tuple[str, ...]:
    """A few authority levels per log, so equal ranks are common and unequal ones happen."""
    return tuple(
        draw(
            st.lists(st.sampled_from(policy.authority_ladder), min_size=1, max_size=3, unique=True)
        )
    )


@st.composite
def logs(
    draw: st.DrawFn,
    *,
    policy: Policy | st.SearchStrategy[Policy] | None = None,
    tenants: Sequence[str] = TENANTS,
    min_size: int = 0,
    max_size: int = 12,
    prefix: str = "",
    erasure: bool = False,
) -> Log:
    """A valid log of every event type over ``tenants`` (the first one is the busiest);
    ``erasure``: with committed and erased values and erase events too."""
    if policy is None:
        policy = draw(policies())
    elif isinstance(policy, st.SearchStrategy):
        policy = draw(policy)
    assert isinstance(policy, Policy)
    weighted = (tenants[0], *tenants) if len(tenants) > 1 else tuple(tenants)
    dense = draw(st.booleans())
    b = _Builder(policy, weighted, prefix, _palette(draw, policy), dense, erasure)
    for _ in _events(draw, min_size, max_size):
        _draw_event(draw, b)
    return Log.of(b.lines, policy)


@st.composite
def extensions(
    draw: st.DrawFn,
    log: Log,
    *,
    after: datetime | None = None,
    min_size: int = 0,
    max_size: int = 6,
    authority_below: int | None = None,
    tenants: Sequence[str] | None = None,
    erasure: bool = False,
) -> Log:
    """Events that may follow ``log`` (referencing its facts), all with ``ts > after``.

    ``authority_below=r`` writes every authority explicitly, strictly below rank ``r``.
    Returns only the new events (a Log whose events are valid after ``log``).
    """
    tenants = tuple(tenants or log.tenants() or TENANTS)
    forced = None
    if authority_below is not None:
        forced = st.sampled_from(log.policy.authority_ladder[:authority_below])
    b = _Builder.resume(
        log,
        tenants=tenants,
        prefix="",
        palette=_palette(draw, log.policy),
        dense=draw(st.booleans()),
        erasure=erasure,
    )
    for _ in _events(draw, min_size, max_size):
        _draw_event(draw, b, after=after, authority=forced)
    whole = Log.of((*log.lines, *b.lines), log.policy)
    return Log(tuple(b.lines), log.policy, whole.events[len(log.lines) :])


@st.composite
def other_tenant_streams(
    draw: st.DrawFn, policy: Policy, *, tenants: Sequence[str] = ("globex", "initech")
) -> Log:
    """A log of other tenants only, with ids prefixed ``o`` so it can be merged into any log."""
    return draw(logs(policy=policy, tenants=tenants, prefix="o", max_size=8))


def merge(first: Log, second: Log) -> Log:
    """Interleave two logs by ``ts`` (stable), keeping each one's order: still a valid log."""
    lines = sorted(
        [(parse_ts(line["ts"]), 0, i, line) for i, line in enumerate(first.lines)]
        + [(parse_ts(line["ts"]), 1, i, line) for i, line in enumerate(second.lines)],
        key=lambda item: item[:3],
    )
    return Log.of((line for *_, line in lines), first.policy)


# -- actors and probe times ------------------------------------------------------------


@st.composite
def actors(draw: st.DrawFn, log: Log, *, tenant: str | None = None) -> dict[str, Any]:
    """An actor object as a caller writes it (optional fields often left out)."""
    if tenant is None:
        tenant = draw(st.sampled_from(log.tenants() or TENANTS))
    actor: dict[str, Any] = {"id": draw(st.sampled_from(PEOPLE)), "tenant": tenant}
    _put(actor, "roles", _maybe(draw, st.lists(st.sampled_from(ROLES), max_size=3)))
    _put(actor, "clearance", _maybe(draw, st.sampled_from(log.policy.clearance_ladder)))
    # an actor at global sees only global facts: scoped actors make precedence interesting
    _put(actor, "scope", draw(st.sampled_from((None, "a/b", "a", "global", "a/b/c", "a/x", "b"))))
    return actor


def _instants(log: Log) -> list[datetime]:
    found = {BASE - timedelta(minutes=1), log.last_ts() + timedelta(days=1)}
    for line in log.lines:
        for field in ("ts", "valid_from", "valid_until"):
            if field in line:
                found.add(parse_ts(line[field]))
    return sorted(found, reverse=True)  # shrinks towards "after everything"


@st.composite
def probe_times(draw: st.DrawFn, log: Log) -> datetime:
    """A probe time, usually exactly at an event's ts or a validity boundary, or just beside it."""
    at = draw(st.sampled_from(_instants(log)))
    nudge = draw(
        st.sampled_from(
            (
                timedelta(0),
                timedelta(0),
                timedelta(microseconds=-1),
                timedelta(microseconds=1),
                timedelta(seconds=30),
            )
        )
    )
    return at + nudge


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    policy: Policy | st.SearchStrategy[Policy] | None = None,
    max_size: int = 12,
    tenant: str | None = "acme",
    tenants: Sequence[str] | None = None,
    erasure: bool = False,
) -> Scenario:
    """A log, an actor (of ``tenant``, the log's busiest tenant, unless None) and a time.

    Unless ``tenants`` is given, half the logs hold one tenant only: denser, so precedence
    and supersession happen more.
    """
    if tenants is None:
        tenants = draw(st.sampled_from((TENANTS, TENANTS[:1])))
    log = draw(logs(policy=policy, tenants=tenants, max_size=max_size, erasure=erasure))
    return Scenario(log, draw(actors(log, tenant=tenant)), draw(probe_times(log)))


# -- written forms ---------------------------------------------------------------------


def _written_ts(draw: st.DrawFn, text: str) -> str:
    """The same instant as ``text`` written with another offset, case or fraction."""
    instant = parse_ts(text)
    minutes = draw(st.sampled_from((0, 0, 120, -330, 23 * 60 + 59, -(23 * 60 + 59))))
    local = instant.astimezone(timezone(timedelta(minutes=minutes)))
    sep = draw(st.sampled_from(("T", "t")))
    out = local.strftime(f"%Y-%m-%d{sep}%H:%M:%S")
    if local.microsecond:
        out += draw(
            st.sampled_from((f".{local.microsecond:06d}", f".{local.microsecond:06d}".rstrip("0")))
        )
    elif draw(st.booleans()):
        out += ".000"
    if minutes == 0:
        return out + draw(st.sampled_from(("Z", "z", "+00:00", "-00:00")))
    sign = "+" if minutes > 0 else "-"
    return out + f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@st.composite
def written_jsonl(draw: st.DrawFn, log: Log) -> str:
    """``log`` as a writer might have written it: any key order, spacing, offsets, blank lines."""
    out = []
    for line in log.lines:
        body = dict(line)
        for field in ("ts", "valid_from", "valid_until"):
            if field in body:
                body[field] = _written_ts(draw, body[field])
        order = draw(st.permutations(list(body)))
        body = {key: body[key] for key in order}
        spaced = draw(st.booleans())
        text = json.dumps(
            body,
            ensure_ascii=draw(st.booleans()),
            separators=(", ", ": ") if spaced else (",", ":"),
        )
        if draw(_sometimes):
            out.append("")
        out.append(text)
    return "\n".join(out) + draw(st.sampled_from(("\n", "", "\n\n")))


# -- malformed input -------------------------------------------------------------------


@attrs.frozen(eq=False)
class Malformed:
    """JSONL rows with exactly one malformation, and the error SPEC §2 says it raises.

    ``rows`` are the physical lines (blank ones included); ``line`` is the 1-based physical
    line of the culprit. The first ``base_rows`` rows are a valid log that a store may
    already hold; the rest is the batch that carries the malformation.
    """

    what: str
    rows: tuple[str, ...]
    error: type[InputError] | tuple[type[InputError], ...]
    line: int
    field: str | None
    policy: Policy
    base_rows: int = 0

    @property
    def text(self) -> str:
        return "\n".join(self.rows) + "\n"

    @property
    def batch(self) -> list[str]:
        return list(self.rows[self.base_rows :])

    @property
    def batch_line(self) -> int:
        return self.line - self.base_rows

    @property
    def stored_by_a_store(self) -> bool:
        """A store stamps an event that omits ``ts``: the one malformation it accepts."""
        return self.what == "missing field" and self.field == "ts"

    def __repr__(self) -> str:
        names = self.error if isinstance(self.error, tuple) else (self.error,)
        expected = " or ".join(cls.__name__ for cls in names)
        text = "".join(
            f"\n  {'|' if i < self.base_rows else ' '} {i + 1:2d} {row}"
            for i, row in enumerate(self.rows)
        )
        return (
            f"Malformed({self.what}: expect {expected} at line {self.line},"
            f" field {self.field!r}; policy={describe_policy(self.policy)}; rows=[{text}\n])"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


# A bad line is built from a template of each type, then broken in one way.
def _template(kind: str, b: _Builder, tenant: str, ts: str) -> dict[str, Any]:
    line: dict[str, Any] = {
        "id": b.fresh("e"),
        "type": kind,
        "ts": ts,
        "actor": "w",
        "tenant": tenant,
    }
    if kind == "assert":
        line.update(fact=b.fresh("F"), key="k1", value="v1")
    elif kind in ("retract", "promote"):
        line["fact"] = "?"
    elif kind in ("grant", "revoke"):
        line.update(key="k1", role="r1")
    else:
        line.update(experience=b.fresh("X"), content="acted on it")
    return line


_REQUIRED = {
    "assert": ("id", "type", "ts", "actor", "tenant", "fact", "key", "value"),
    "retract": ("id", "type", "ts", "actor", "tenant", "fact"),
    "promote": ("id", "type", "ts", "actor", "tenant", "fact"),
    "grant": ("id", "type", "ts", "actor", "tenant"),
    "revoke": ("id", "type", "ts", "actor", "tenant"),
    "experience": ("id", "type", "ts", "actor", "tenant", "experience", "content"),
}

# (field, wrong JSON value) pairs for every type; each is a ValueTypeError naming the field.
_WRONG_TYPES: dict[str, tuple[tuple[str, Any], ...]] = {
    "envelope": (
        ("id", 1),
        ("id", ""),
        ("actor", ["w"]),
        ("tenant", None),
        ("tenant", True),
        ("ts", "2026-03-01T09:00:00"),
        ("ts", "2026-03-01 09:00"),
        ("ts", 1772355600),
        ("ts", "2026-03-01T09:00:60Z"),
        ("ts", "2026-03-01T09:00:00.1234567Z"),
        ("ts", "2026-02-30T09:00:00Z"),
    ),
    "assert": (
        ("key", 3),
        ("key", ""),
        ("value", None),
        ("value", ["v1"]),
        ("value", {"v": 1}),
        ("value", 2**53),
        ("scope", "a//b"),
        ("scope", "/a"),
        ("scope", "a b"),
        ("scope", ""),
        ("status", "final"),
        ("kind", "opinion"),
        ("priority", 1),
        ("visibility", ["r1"]),
        ("visibility.roles", "r1"),
        ("visibility.roles", [""]),
        ("visibility.actors", [1]),
        ("valid_from", "tomorrow"),
        ("depends_on", "F1"),
        ("supersedes", [1]),
    ),
    "retract": (("reason", 5),),
    "experience": (
        ("content", None),
        ("uses", "F1"),
        ("applicability", "maybe"),
        ("experience", ""),
    ),
    "grant": (("role", ""), ("to_actor", 7)),
}


def _set_field(line: dict[str, Any], field: str, value: Any) -> None:
    if "." in field:
        outer, inner = field.split(".")
        line.setdefault(outer, {})[inner] = value
    else:
        line[field] = value


@st.composite
def malformed_logs(
    draw: st.DrawFn, *, policy: Policy | None = None, base: Log | None = None
) -> Malformed:
    """A valid log with one malformation inserted, and the typed error it must raise.

    With ``base`` (what a store already holds), the malformation goes into a batch of
    valid events that follows it, so the batch is refused as a whole.
    """
    what = draw(st.sampled_from(sorted(MALFORMATIONS)))
    if base is None:
        policy = policy if policy is not None else draw(policies())
        start = draw(logs(policy=policy, max_size=6))
        lines = list(start.lines)
        lowest = 0
    else:
        policy = base.policy
        more = draw(extensions(base, max_size=3))
        start = base + more
        lines = list(start.lines)
        lowest = len(base.lines)
    b = _Builder.resume(start, tenants=TENANTS, prefix="", palette=policy.authority_ladder)
    position = draw(st.integers(lowest, len(lines)))
    bad_lines, error, index, field = MALFORMATIONS[what](draw, b, lines, position)
    rows: list[str] = []
    physical: dict[int, int] = {}
    for i, item in enumerate(bad_lines):
        if i >= lowest and draw(_sometimes):
            rows.append("   " if draw(st.booleans()) else "")
        rows.append(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))
        physical[i] = len(rows)
    return Malformed(what, tuple(rows), error, physical[index], field, policy, base_rows=lowest)


_Builder_ = Callable[
    [Any, _Builder, list[dict[str, Any]], int], tuple[list[Any], Any, int, str | None]
]


def _ts_at(lines: Sequence[dict[str, Any]], position: int) -> str:
    """A ts that keeps the order when a line is inserted at ``position``."""
    return lines[position - 1]["ts"] if position else format_ts(BASE)


def _facts_before(lines: Sequence[dict[str, Any]], position: int, tenant: str) -> list[str]:
    return [
        line["fact"]
        for line in lines[:position]
        if line["type"] == "assert" and line["tenant"] == tenant
    ]


def _with_fact(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int, tenant: str
) -> tuple[list[dict[str, Any]], int, str]:
    """Make sure an assert of ``tenant`` precedes ``position``; returns lines, position, fact."""
    known = _facts_before(lines, position, tenant)
    if known:
        return lines, position, draw(st.sampled_from(known))
    line = _template("assert", b, tenant, _ts_at(lines, position))
    return lines[:position] + [line] + lines[position:], position + 1, line["fact"]


def _insert(lines: list[Any], position: int, *bad: Any) -> list[Any]:
    return lines[:position] + list(bad) + lines[position:]


def _m_duplicate_event_id(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    if not lines:
        lines = [_template("assert", b, "acme", format_ts(BASE))]
        position = 1
    position = max(position, 1)
    kind = draw(st.sampled_from(("assert", "grant", "experience")))
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    bad["actor"] = "intruder"  # never byte-identical to the event it collides with
    bad["id"] = draw(st.sampled_from([line["id"] for line in lines[:position]]))
    return _insert(lines, position, bad), DuplicateIdError, position, "id"


def _m_duplicate_fact_id(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    tenant = draw(st.sampled_from(TENANTS))
    lines, position, _ = _with_fact(draw, b, lines, position, draw(st.sampled_from(TENANTS)))
    earlier = [line["fact"] for line in lines[:position] if line["type"] == "assert"]
    bad = _template("assert", b, tenant, _ts_at(lines, position))
    bad["fact"] = draw(st.sampled_from(earlier))  # also across tenants: one namespace
    return _insert(lines, position, bad), DuplicateIdError, position, "fact"


def _m_duplicate_experience_id(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    first = _template("experience", b, draw(st.sampled_from(TENANTS)), _ts_at(lines, position))
    second = _template("experience", b, draw(st.sampled_from(TENANTS)), first["ts"])
    second["experience"] = first["experience"]
    return _insert(lines, position, first, second), DuplicateIdError, position + 1, "experience"


def _m_unknown_type(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    bad = _template("assert", b, "acme", _ts_at(lines, position))
    bad["type"] = draw(st.sampled_from(("assertion", "delete", "Assert", "", "update")))
    return _insert(lines, position, bad), UnknownFieldError, position, "type"


def _m_unknown_field(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    kind = draw(st.sampled_from(sorted(_REQUIRED)))
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    if kind in ("retract", "promote"):
        lines, position, bad["fact"] = _with_fact(draw, b, lines, position, "acme")
        bad["ts"] = _ts_at(lines, position)
    field = draw(st.sampled_from(("colour", "Type", "_private", "visibility.colour")))
    if field == "visibility.colour" and kind != "assert":
        field = "colour"  # only an assert has a visibility object
    _set_field(bad, field, "red")
    return _insert(lines, position, bad), UnknownFieldError, position, field


def _m_missing_field(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    kind = draw(st.sampled_from(sorted(_REQUIRED)))
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    if kind in ("retract", "promote"):
        lines, position, bad["fact"] = _with_fact(draw, b, lines, position, "acme")
        bad["ts"] = _ts_at(lines, position)
    choices = list(_REQUIRED[kind])
    if kind in ("grant", "revoke"):
        choices += ["fact/key", "role/to_actor"]
    field = draw(st.sampled_from(choices))
    if field == "fact/key":
        del bad["key"]
        # SPEC §2 item 3 lists "names neither" after the ValueTypeError sentence; item 2
        # (a required field is missing) reads as MissingFieldError. Either is accepted.
        return _insert(lines, position, bad), (MissingFieldError, ValueTypeError), position, "fact"
    if field == "role/to_actor":
        del bad["role"]
        return _insert(lines, position, bad), (MissingFieldError, ValueTypeError), position, "role"
    del bad[field]
    return _insert(lines, position, bad), MissingFieldError, position, field


def _m_both_of_a_pair(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    kind = draw(st.sampled_from(("grant", "revoke")))
    lines, position, fact = _with_fact(draw, b, lines, position, "acme")
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    if draw(st.booleans()):
        bad["fact"] = fact
        field = "fact"
    else:
        bad["to_actor"] = "alice"
        field = "role"
    return _insert(lines, position, bad), ValueTypeError, position, field


def _reference_holder(
    draw: st.DrawFn, b: _Builder, tenant: str, ts: str, target: str
) -> tuple[dict[str, Any], str]:
    """An event of ``tenant`` whose one reference names ``target``; returns it and the field."""
    kind = draw(
        st.sampled_from(
            ("supersedes", "depends_on", "uses", "retract", "promote", "grant", "revoke")
        )
    )
    if kind in ("supersedes", "depends_on"):
        line = _template("assert", b, tenant, ts)
        line[kind] = [target]
        return line, f"{kind}[0]"
    if kind == "uses":
        line = _template("experience", b, tenant, ts)
        line["uses"] = [target]
        return line, "uses[0]"
    line = _template(kind, b, tenant, ts)
    if kind in ("grant", "revoke"):
        del line["key"]
    line["fact"] = target
    return line, "fact"


def _m_unknown_reference(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    bad, field = _reference_holder(draw, b, "acme", _ts_at(lines, position), "NOPE")
    return _insert(lines, position, bad), UnknownReferenceError, position, field


def _m_later_reference(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    ts = _ts_at(lines, position)
    later = _template("assert", b, "acme", lines[-1]["ts"] if lines else ts)
    bad, field = _reference_holder(draw, b, "acme", ts, later["fact"])
    return _insert(lines, position, bad) + [later], UnknownReferenceError, position, field


def _m_other_tenant_reference(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    lines, position, fact = _with_fact(draw, b, lines, position, "globex")
    bad, field = _reference_holder(draw, b, "acme", _ts_at(lines, position), fact)
    return _insert(lines, position, bad), UnknownReferenceError, position, field


def _m_self_reference(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    bad = _template("assert", b, "acme", _ts_at(lines, position))
    field = draw(st.sampled_from(("supersedes", "depends_on")))
    known = _facts_before(lines, position, "acme")
    targets = [bad["fact"]]
    if draw(st.booleans()) and known:
        targets = [draw(st.sampled_from(known)), bad["fact"]]
    bad[field] = targets
    return _insert(lines, position, bad), CycleError, position, f"{field}[{len(targets) - 1}]"


def _m_ts_backwards(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    if not lines:
        lines = [_template("assert", b, "acme", format_ts(BASE))]
    position = max(position, 1)
    kind = draw(st.sampled_from(("assert", "grant", "experience")))
    earlier = parse_ts(lines[position - 1]["ts"])
    step = draw(
        st.sampled_from((timedelta(microseconds=1), timedelta(minutes=1), timedelta(days=400)))
    )
    bad = _template(kind, b, draw(st.sampled_from(TENANTS)), format_ts(earlier - step))
    return _insert(lines, position, bad), TimestampOrderError, position, "ts"


def _m_valid_until_not_after_from(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    bad = _template("assert", b, "acme", _ts_at(lines, position))
    start = parse_ts(bad["ts"]) + timedelta(minutes=draw(st.sampled_from((0, 5, -5))))
    bad["valid_from"] = format_ts(start)
    bad["valid_until"] = format_ts(
        start - draw(st.sampled_from((timedelta(0), timedelta(minutes=1))))
    )
    return _insert(lines, position, bad), TimestampOrderError, position, "valid_until"


def _m_invalid_json(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    text = json.dumps(_template("assert", b, "acme", _ts_at(lines, position)))
    broken = draw(
        st.sampled_from(
            (
                text[:-1],
                text + "}",
                text + " x",
                text.replace(":", "=", 1),
                text.replace('"', "'"),
                text[:-1] + ",}",
                "[" + text + "]",
                '"just a string"',
                "42",
                "null",
                "{",
            )
        )
    )
    return _insert(lines, position, broken), JSONSyntaxError, position, None


def _m_duplicate_json_key(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    line = _template("assert", b, "acme", _ts_at(lines, position))
    key = draw(st.sampled_from(("id", "value", "key")))
    text = json.dumps(line)[:-1] + f", {json.dumps(key)}: {json.dumps(line[key])}}}"
    return _insert(lines, position, text), JSONSyntaxError, position, key


def _m_nan_or_infinity(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    line = _template("assert", b, "acme", _ts_at(lines, position))
    token = draw(st.sampled_from(("NaN", "Infinity", "-Infinity")))
    text = json.dumps(line).replace('"value": "v1"', f'"value": {token}')
    # SPEC §2.1: "NaN, Infinity or a float appears (JSONSyntaxError, or ValueTypeError
    # naming the field of a float)": NaN and Infinity are not JSON, so JSONSyntaxError.
    return _insert(lines, position, text), JSONSyntaxError, position, None


def _m_float(draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int) -> Any:
    line = _template("assert", b, "acme", _ts_at(lines, position))
    literal = draw(st.sampled_from(("22.5", "1e3", "0.0", "-1.0E-2", "1.0")))
    text = json.dumps(line).replace('"value": "v1"', f'"value": {literal}')
    return _insert(lines, position, text), ValueTypeError, position, "value"


def _m_wrong_type(draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int) -> Any:
    group = draw(st.sampled_from(sorted(_WRONG_TYPES)))
    field, value = draw(st.sampled_from(_WRONG_TYPES[group]))
    kind = group if group in _REQUIRED else draw(st.sampled_from(sorted(_REQUIRED)))
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    if kind in ("retract", "promote"):
        lines, position, bad["fact"] = _with_fact(draw, b, lines, position, "acme")
        bad["ts"] = _ts_at(lines, position)
    _set_field(bad, field, value)
    return _insert(lines, position, bad), ValueTypeError, position, field


def _m_unknown_level(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    kind = draw(st.sampled_from(("assert", "retract", "promote", "grant", "revoke", "clearance")))
    name = draw(st.sampled_from(("boss", "", "PEER", "root")))
    if kind == "clearance":
        bad = _template("assert", b, "acme", _ts_at(lines, position))
        bad["visibility"] = {"clearance": name}
        return _insert(lines, position, bad), ValueTypeError, position, "visibility.clearance"
    bad = _template(kind, b, "acme", _ts_at(lines, position))
    if kind in ("retract", "promote"):
        lines, position, bad["fact"] = _with_fact(draw, b, lines, position, "acme")
        bad["ts"] = _ts_at(lines, position)
    bad["authority"] = name
    return _insert(lines, position, bad), ValueTypeError, position, "authority"


def _m_lone_surrogate(
    draw: st.DrawFn, b: _Builder, lines: list[dict[str, Any]], position: int
) -> Any:
    line = _template("assert", b, "acme", _ts_at(lines, position))
    field = draw(st.sampled_from(("value", "key")))
    text = json.dumps(line).replace(f'"{field}": "{line[field]}"', f'"{field}": "x\\ud800"')
    return _insert(lines, position, text), ValueTypeError, position, field


MALFORMATIONS: dict[str, _Builder_] = {
    "duplicate event id": _m_duplicate_event_id,
    "duplicate fact id": _m_duplicate_fact_id,
    "duplicate experience id": _m_duplicate_experience_id,
    "unknown type": _m_unknown_type,
    "unknown field": _m_unknown_field,
    "missing field": _m_missing_field,
    "both of a one-of pair": _m_both_of_a_pair,
    "reference to an unknown fact": _m_unknown_reference,
    "reference to a later fact": _m_later_reference,
    "reference to another tenant's fact": _m_other_tenant_reference,
    "self reference": _m_self_reference,
    "ts going backwards": _m_ts_backwards,
    "valid_until not after valid_from": _m_valid_until_not_after_from,
    "invalid JSON": _m_invalid_json,
    "duplicate JSON key": _m_duplicate_json_key,
    "NaN or Infinity": _m_nan_or_infinity,
    "float": _m_float,
    "wrong value type": _m_wrong_type,
    "unknown authority or clearance": _m_unknown_level,
    "lone surrogate": _m_lone_surrogate,
}
