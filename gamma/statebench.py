"""Import StateBench timelines as gamma conformance cases.

StateBench (the ``statebench`` package, MIT) publishes timelines as JSON
Lines: an initial state (persistent facts, working set, environment with
``now``), then events (``conversation_turn``, ``state_write``,
``supersession``, ``query`` with ``ground_truth``).  This module turns one
timeline into one gamma case (DESIGN section 9) plus a record of what only
prose carried, so nothing is silently dropped.

The conversion is pure: :func:`convert_timeline` takes the parsed JSON object
and returns ``(case, unmapped)``.  The only I/O is :func:`import_file` at the
bottom.  SPEC.md §15 states the mapping in prose; the rules in
short:

* every structured fact (initial persistent facts, initial environment
  entries, ``[SCOPE: label] key: value`` working-set items, and every write of
  a ``state_write`` / ``supersession`` before the case's query) becomes one
  ``assert``;
* ``supersedes`` / ``depends_on`` name a fact id or a key and become
  references to the latest earlier fact with that id (else that key);
* scope ``draft`` / ``hypothetical`` become ``status``; other non-global
  scopes and ``[SCOPE: ...]`` labels become gamma scopes (the actor stays at
  ``global``);
* ``[RESTRICTED: label]`` becomes ``visibility.clearance`` above the actor's
  (``[RESTRICTED: tenant_x]`` puts the fact in tenant ``tenant_x``);
  ``(valid through YYYY-MM-DD)`` becomes ``valid_until``;
* ``expect`` is derived from the ground truth only where the structure makes
  the outcome certain under the default policy; everything else is listed in
  the unmapped record.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from .errors import InputError

__all__ = [
    "StatebenchError",
    "ImportReport",
    "convert_timeline",
    "parse_timelines",
    "import_file",
    "AUTHORITY_LADDER",
    "RESTRICTED_CLEARANCE",
    "CF_AXES",
]

# The default policy's authority ladder, low to high (DESIGN section 4).  The
# importer only reasons about outcomes under the default policy.
AUTHORITY_LADDER: tuple[str, ...] = (
    "unverified",
    "system",
    "subordinate",
    "peer",
    "manager",
    "executive",
    "policy",
)
DEFAULT_AUTHORITY = "peer"
# Clearance given to a ``[RESTRICTED: ...]`` fact: above the default
# ("public") clearance every imported actor has.
RESTRICTED_CLEARANCE = "confidential"
# StateBench v2's counterfactual axes and who can decide them (its
# generator.counterfactual.AXES table).
CF_AXES: dict[str, str] = {
    "access_control": "engine",
    "scope_binding": "engine",
    "actor_isolation": "engine",
    "temporal_validity": "model",
    "supersession": "model",
    "commitment_status": "model",
    "dependency_validity": "model",
}
# expected_applicability -> the experience applicability that yields it when
# the state is valid (the paper's table, valid row).
_APPLICABILITY_FOR_VERDICT = {"KEEP": "applicable", "ADAPT": "adaptable", "REJECT": "unusable"}

_EVENT_TYPES = ("conversation_turn", "state_write", "supersession", "query")
_LAYERS = ("persistent_facts", "working_set", "environment")
_SUBSTITUTING = frozenset({"superseded", "outranked", "overridden"})
_VALIDITY = frozenset(
    {
        "draft",
        "hypothetical",
        "not_yet_valid",
        "expired",
        "retracted",
        "superseded",
        "outranked",
        "overridden",
        "dependency_invalidated",
    }
)
_HIDDEN = frozenset({"access_denied", "dependency_restricted"})
_MAX_INT = 2**53 - 1

_RESTRICTED_RE = re.compile(r"^\s*\[RESTRICTED:\s*([^\]]*)\]\s*")
_TENANT_LABEL_RE = re.compile(r"^tenant_[A-Za-z0-9_.:-]+$")
_VALID_THROUGH_RE = re.compile(r"\(valid through (\d{4}-\d{2}-\d{2})\)\s*$")
_WS_SCOPE_RE = re.compile(r"^\[SCOPE:\s*([^\]]+?)\s*\]\s*([A-Za-z_][A-Za-z0-9_.]*):\s?(.*)$", re.S)
_SCOPE_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
_CF_ID_RE = re.compile(r"^(?P<prefix>[A-Z0-9_]+)-(?P<side>POS|CF)-(?P<n>\d+)$")


class StatebenchError(InputError):
    """A timeline that cannot be converted: names the 1-based line and the field path.

    ``line`` is None when the timeline did not come from a file; ``field`` is
    a dotted path such as ``events[3].writes[0].key``, or None when the whole
    line is at fault (not JSON, not an object).
    """


@attrs.frozen
class ImportReport:
    """What :func:`import_file` wrote: timelines read, cases written, unmapped items listed."""

    timelines: int
    cases: int
    unmapped: int
    unmapped_by_kind: tuple[tuple[str, int], ...] = ()


# --------------------------------------------------------------------------- #
# Reading fields
# --------------------------------------------------------------------------- #


def _fail(path: str | None, message: str) -> StatebenchError:
    return StatebenchError(message, field=path)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _text(value: Any, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"must be a string, not {_json_type(value)}")
    if not empty and not value:
        raise _fail(path, "must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(path, "is not valid Unicode") from None
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"must be an object, not {_json_type(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"must be an array, not {_json_type(value)}")
    return value


def _req(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj or obj[key] is None:
        raise _fail(_join(path, key), "required field is missing")
    return obj[key]


def _opt_obj(obj: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = obj.get(key)
    return {} if value is None else _obj(value, _join(path, key))


def _opt_list(obj: dict[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    return [] if value is None else _list(value, _join(path, key))


def _opt_text(obj: dict[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    return None if value is None else _text(value, _join(path, key))


def _ts(value: Any, path: str) -> datetime:
    text = _text(value, path, empty=False)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _fail(path, f"not an ISO 8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:  # StateBench writes naive times; they are read as UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _fmt(ts: datetime) -> str:
    ts = ts.astimezone(UTC)
    text = ts.strftime("%Y-%m-%dT%H:%M:%S")
    if ts.microsecond:
        text += f".{ts.microsecond:06d}"
    return text + "Z"


def _value(value: Any, path: str) -> str | int | bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise _fail(path, "integer beyond ±(2^53−1)")
        return value
    if isinstance(value, str):
        return _text(value, path)
    raise _fail(path, f"must be a string, an integer or a boolean, not {_json_type(value)}")


def _refs(value: Any, path: str) -> list[str]:
    """A reference field: null, one id/key, or a list of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [_text(value, path)] if value else []
    items = _list(value, path)
    return [_text(item, f"{path}[{i}]", empty=False) for i, item in enumerate(items)]


def _scope_slug(label: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.:-]+", "_", label.strip()).strip("_")
    return slug


def _mentions(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as a whole phrase, case-insensitively."""
    phrase = phrase.strip()
    if not phrase:
        return False
    pattern = re.escape(phrase)
    if phrase[0].isalnum():
        pattern = r"(?<!\w)" + pattern
    if phrase[-1].isalnum():
        pattern += r"(?!\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


# --------------------------------------------------------------------------- #
# Conversion state
# --------------------------------------------------------------------------- #


@attrs.define
class _Fact:
    id: str
    source_id: str | None
    key: str  # gamma key
    source_key: str  # StateBench key (without the layer prefix)
    tenant: str
    text: str  # the StateBench value as written (markers included), for phrase matching
    value: str | int | bool
    status: str = "committed"
    scope: str = "global"
    authority: str | None = None
    restricted: bool = False
    valid_until: datetime | None = None
    supersedes: list[str] = attrs.Factory(list)
    depends_on: list[str] = attrs.Factory(list)
    retracted: bool = False
    path: str = ""
    layer: str = "persistent_facts"

    @property
    def rank(self) -> int:
        return AUTHORITY_LADDER.index(self.authority or DEFAULT_AUTHORITY)


@attrs.define
class _Build:
    """Events and facts emitted so far for one timeline, plus the unmapped items."""

    tenant: str
    events: list[dict[str, Any]] = attrs.Factory(list)
    facts: list[_Fact] = attrs.Factory(list)
    items: list[dict[str, str]] = attrs.Factory(list)
    last_ts: datetime | None = None
    used_ids: set[str] = attrs.Factory(set)
    # StateBench ids written more than once in the timeline (W-AUTO...): never kept bare.
    duplicated: set[str] = attrs.Factory(set)

    def note(self, kind: str, path: str, detail: str | None = None) -> None:
        item = {"kind": kind, "path": path}
        if detail is not None:
            item["detail"] = detail
        self.items.append(item)

    def stamp(self, ts: datetime) -> str:
        """The event's ts, raised to the previous one so ``ts`` never decreases."""
        if self.last_ts is not None and ts < self.last_ts:
            ts = self.last_ts
        self.last_ts = ts
        return _fmt(ts)

    def emit(self, body: dict[str, Any], ts: datetime, actor: str, tenant: str) -> dict[str, Any]:
        event = {"id": f"ev{len(self.events) + 1}", "ts": self.stamp(ts), "actor": actor,
                 "tenant": tenant}
        event.update(body)
        self.events.append(event)
        return event

    def resolve(self, target: str, tenant: str) -> _Fact | None:
        """The latest earlier fact of ``tenant`` whose id, else whose key, is ``target``."""
        for attr in ("source_id", "id", "source_key", "key"):
            for fact in reversed(self.facts):
                if fact.tenant == tenant and getattr(fact, attr) == target:
                    return fact
        return None


def _writer(source: dict[str, Any], fallback: str) -> str:
    for name in ("identity", "type"):
        value = source.get(name)
        if isinstance(value, str) and value:
            return value
    return fallback


def _add_fact(
    build: _Build,
    *,
    path: str,
    ts: datetime,
    source_id: str | None,
    key: str,
    source_key: str,
    raw_value: Any,
    value_path: str,
    layer: str,
    source: dict[str, Any],
    scope: str | None,
    supersedes: list[str],
    depends_on: list[str],
    is_constraint: bool,
    is_valid: bool,
    writer_fallback: str,
    default_authority: str | None = None,
) -> _Fact:
    value = _value(raw_value, value_path)
    text = value if isinstance(value, str) else json.dumps(value)
    tenant = build.tenant
    restricted = False
    valid_until = None
    if isinstance(value, str):
        marker = _RESTRICTED_RE.match(value)
        if marker:
            label = marker.group(1).strip()
            value = value[marker.end():]
            if _TENANT_LABEL_RE.match(label):
                tenant = label
            else:
                restricted = True
                build.note("restriction_label", value_path, label)
        through = _VALID_THROUGH_RE.search(value)
        if through:
            try:
                day = datetime.strptime(through.group(1), "%Y-%m-%d")
            except ValueError:
                build.note("valid_through_unreadable", value_path, through.group(1))
            else:
                valid_until = (day + timedelta(days=1)).replace(tzinfo=UTC)

    authority = source.get("authority")
    if authority is not None:
        authority = _text(authority, _join(path, "source.authority"))
        if authority not in AUTHORITY_LADDER:
            build.note("authority_not_on_ladder", _join(path, "source.authority"), authority)
            authority = None
    if authority is None:
        authority = default_authority

    status, gamma_scope = "committed", "global"
    if scope is not None and scope != "global":
        if scope in ("draft", "hypothetical"):
            status = scope
        else:
            slug = _scope_slug(scope)
            if slug and slug != "global":
                gamma_scope = slug
            else:
                build.note("scope_unreadable", _join(path, "scope"), scope)

    fact_id = _fresh_id(build, source_id, key)
    fact = _Fact(
        id=fact_id,
        source_id=source_id,
        key=key,
        source_key=source_key,
        tenant=tenant,
        text=text,
        value=value,
        status=status,
        scope=gamma_scope,
        authority=authority,
        restricted=restricted,
        valid_until=valid_until,
        path=path,
        layer=layer,
    )
    body: dict[str, Any] = {"type": "assert", "fact": fact_id, "key": key, "value": value}
    if gamma_scope != "global":
        body["scope"] = gamma_scope
    if status != "committed":
        body["status"] = status
    if authority is not None:
        body["authority"] = authority
    if is_constraint:
        body["kind"] = "constraint"
    if restricted:
        body["visibility"] = {"clearance": RESTRICTED_CLEARANCE}
    if valid_until is not None:
        body["valid_until"] = _fmt(valid_until)
    for name, targets, out in (
        ("supersedes", supersedes, fact.supersedes),
        ("depends_on", depends_on, fact.depends_on),
    ):
        for target in targets:
            ref = build.resolve(target, tenant)
            if ref is None:
                build.note("unresolved_reference", f"{_join(path, name)}", target)
            elif ref.id not in out:
                out.append(ref.id)
                if name == "supersedes" and ref.rank > fact.rank:
                    build.note("supersession_below_authority", _join(path, name), ref.id)
        if out:
            body[name] = list(out)
    event = build.emit(body, ts, _writer(source, writer_fallback), tenant)
    build.facts.append(fact)
    if not is_valid:
        retract: dict[str, Any] = {"type": "retract", "fact": fact_id,
                                   "reason": "is_valid is false in the initial state"}
        if authority is not None:
            retract["authority"] = authority
        build.emit(retract, ts, event["actor"], tenant)
        fact.retracted = True
    return fact


def _fresh_id(build: _Build, source_id: str | None, key: str) -> str:
    """The StateBench id when it names one fact only, else ``<id or key>#<n>``."""
    base = source_id or key
    candidate = base
    if candidate in build.used_ids or candidate in build.duplicated:
        n = 1
        while f"{base}#{n}" in build.used_ids or f"{base}#{n}" in build.duplicated:
            n += 1
        candidate = f"{base}#{n}"
    build.used_ids.add(candidate)
    return candidate


# --------------------------------------------------------------------------- #
# What gamma's default policy makes of the emitted facts
# --------------------------------------------------------------------------- #


@attrs.define
class _Outcome:
    codes: dict[str, set[str]]
    uncertain: set[str]
    superseder: dict[str, str]


def _derive(facts: list[_Fact], tenant: str, at: datetime) -> _Outcome:
    """Exclusion codes for the actor (scope global, default clearance) at ``at``.

    A small, conservative reading of DESIGN section 5 over the only shapes the
    importer emits (asserts, and retracts right after their assert).  Facts
    whose outcome depends on a corner the importer does not reason about are
    put in ``uncertain`` and get no expectation.
    """
    codes: dict[str, set[str]] = {f.id: set() for f in facts}
    uncertain: set[str] = set()
    superseder: dict[str, str] = {}
    by_id = {f.id: f for f in facts}
    position = {f.id: n for n, f in enumerate(facts)}
    own = [f for f in facts if f.tenant == tenant]
    for fact in facts:
        if fact.tenant != tenant:
            codes[fact.id] = {"tenant_isolation"}
    live: dict[str, bool] = {f.id: not f.retracted for f in own}
    for newer in own:
        if newer.status != "committed":
            continue  # never takes effect, supersedes nothing
        targets = [by_id[t] for t in newer.supersedes]
        targets += [
            f
            for f in own
            if f is not newer
            and f.key == newer.key
            and f.scope == newer.scope
            and f.status == "committed"
            and position[f.id] < position[newer.id]
            and f.rank <= newer.rank
        ]
        for old in targets:
            if old.retracted:
                uncertain.add(old.id)
            elif old.rank <= newer.rank and live[old.id]:
                live[old.id] = False
                codes[old.id].add("superseded")
                superseder[old.id] = newer.id
    for fact in own:
        if fact.restricted:
            codes[fact.id].add("access_denied")
        if fact.scope != "global":
            codes[fact.id].add("out_of_scope")
        if fact.status != "committed":
            codes[fact.id].add(fact.status)
        if fact.valid_until is not None and fact.valid_until <= at:
            codes[fact.id].add("expired")
        if fact.retracted:
            codes[fact.id].add("retracted")
    # Precedence among candidates of one key (all global, so authority decides).
    by_key: dict[str, list[_Fact]] = {}
    for fact in own:
        if fact.scope == "global" and not (codes[fact.id] & _VALIDITY):
            by_key.setdefault(fact.key, []).append(fact)
    for group in by_key.values():
        if any(f.depends_on for f in group):
            if len(group) > 1:
                uncertain.update(f.id for f in group)
            continue
        top = max(f.rank for f in group)
        for fact in group:
            if fact.rank < top:
                codes[fact.id].add("outranked")
    # Dependencies, transitively (references point to earlier facts).
    for fact in own:
        for dep in fact.depends_on:
            if dep in uncertain:
                uncertain.add(fact.id)
            if codes[dep] & _VALIDITY:
                codes[fact.id].add("dependency_invalidated")
            if codes[dep] & _HIDDEN:
                codes[fact.id].add("dependency_restricted")
    return _Outcome(codes=codes, uncertain=uncertain, superseder=superseder)


# --------------------------------------------------------------------------- #
# One timeline
# --------------------------------------------------------------------------- #


def _phrases(entries: list[Any], path: str, build: _Build) -> list[tuple[str, list[str]]]:
    """Ground-truth mention requirements as (path, phrases); regexes are noted, not used."""
    out: list[tuple[str, list[str]]] = []
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if isinstance(entry, str):
            if entry.strip():
                out.append((where, [_text(entry, where)]))
            continue
        req = _obj(entry, where)
        phrase = _text(_req(req, "phrase", where), _join(where, "phrase"))
        alternatives = [
            _text(a, f"{where}.alternatives[{j}]")
            for j, a in enumerate(_opt_list(req, "alternatives", where))
        ]
        if req.get("is_regex"):
            build.note("regex_phrase", where, phrase)
            continue
        phrases = [p for p in [phrase, *alternatives] if p.strip()]
        if phrases:
            out.append((where, phrases))
    return out


def _dedupe(items: Iterable[str], drop: Iterable[str] = ()) -> list[str]:
    seen = {d.casefold() for d in drop}
    out = []
    for item in items:
        if item.casefold() not in seen:
            seen.add(item.casefold())
            out.append(item)
    return out


def convert_timeline(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Convert one parsed StateBench timeline into ``(case, unmapped record)``.

    Raises :class:`StatebenchError` (``line`` None) naming the field at fault.
    """
    timeline = _obj(obj, "")
    timeline_id = _text(_req(timeline, "id", ""), "id", empty=False)
    if "/" in timeline_id or "\\" in timeline_id or "\0" in timeline_id or timeline_id[0] == ".":
        raise _fail("id", f"cannot name a case file: {timeline_id!r}")
    track = _text(_req(timeline, "track", ""), "track", empty=False)
    actors = _obj(_req(timeline, "actors", ""), "actors")
    user = _obj(_req(actors, "user", "actors"), "actors.user")
    user_id = _text(_req(user, "id", "actors.user"), "actors.user.id", empty=False)
    tenant = _text(_req(user, "org", "actors.user"), "actors.user.org", empty=False)
    role = _opt_text(user, "role", "actors.user")
    initial = _obj(_req(timeline, "initial_state", ""), "initial_state")
    raw_events = _list(_req(timeline, "events", ""), "events")
    environment = _opt_obj(initial, "environment", "initial_state")
    now = None
    if environment.get("now") is not None:
        now = _ts(environment["now"], "initial_state.environment.now")

    # Read every event's type and time first; the case asks the last query.
    kinds: list[str] = []
    stamps: list[datetime] = []
    for i, raw in enumerate(raw_events):
        event = _obj(raw, f"events[{i}]")
        kind = _text(_req(event, "type", f"events[{i}]"), f"events[{i}].type")
        if kind not in _EVENT_TYPES:
            raise _fail(f"events[{i}].type", f"unknown event type {kind!r}")
        kinds.append(kind)
        stamps.append(_ts(_req(event, "ts", f"events[{i}]"), f"events[{i}].ts"))
    queries = [i for i, kind in enumerate(kinds) if kind == "query"]
    chosen = queries[-1] if queries else None

    build = _Build(tenant=tenant)
    build.duplicated = _duplicated_ids(initial, raw_events, kinds, chosen)
    _emit_initial_state(build, initial, environment, now, min(stamps) if stamps else None)
    turns = _emit_events(build, raw_events, kinds, stamps, chosen)

    case: dict[str, Any] = {"id": timeline_id, "suite": "imported"}
    times = [t for t in (now, build.last_ts) if t is not None]
    query: dict[str, Any] | None = None
    if chosen is not None:
        query = _obj(raw_events[chosen], f"events[{chosen}]")
        times.append(stamps[chosen])
        case["question"] = _text(
            _req(query, "prompt", f"events[{chosen}]"), f"events[{chosen}].prompt"
        )
    else:
        build.note("no_query", "events")
    if not times:
        raise _fail("events", "no timestamp anywhere: cannot choose the probe time")
    at = max(times)
    case["at"] = _fmt(at)
    actor: dict[str, Any] = {"id": user_id, "tenant": tenant}
    if role:
        actor["roles"] = [role]
    case["actor"] = actor

    outcome = _derive(build.facts, tenant, at)
    expect: dict[str, Any] = {
        "admitted": [],
        "excluded": {},
        "experiences": {},
        "ignored": {},
        "exact": False,
    }
    admitted: set[str] = set()
    excluded: dict[str, set[str]] = {}
    gold: list[str] = []
    drift: list[str] = []
    if query is not None:
        gpath = f"events[{chosen}].ground_truth"
        truth = _obj(_req(query, "ground_truth", f"events[{chosen}]"), gpath)
        _expectations(build, outcome, truth, gpath, admitted, excluded, gold, drift)
        expected = truth.get("expected_applicability")
        if expected is not None:
            epath = _join(gpath, "expected_applicability")
            if expected not in _APPLICABILITY_FOR_VERDICT:
                raise _fail(epath, f"must be KEEP, ADAPT or REJECT, not {expected!r}")
            _experience(build, case, expect, outcome, epath, expected, turns, timeline_id)

    expect["admitted"] = sorted(admitted)
    expect["excluded"] = {f: sorted(c) for f, c in sorted(excluded.items())}
    case["events"] = build.events
    probe = sorted({f.key for f in build.facts if f.id in admitted or f.id in excluded})
    if probe:
        case["probe"] = probe
    case["expect"] = expect
    pool = _pool(build, outcome, gold, drift)
    if pool and pool.get("gold"):  # without a gold answer there is nothing to grade
        case["pool"] = pool
    if track.startswith("cf_"):
        _pair_fields(build, case, track[3:], timeline_id)

    record = {
        "case": timeline_id,
        "items": build.items,
        "query": f"events[{chosen}]" if chosen is not None else None,
        "timeline": timeline_id,
        "track": track,
    }
    return case, record


def _source(obj: dict[str, Any], path: str) -> dict[str, Any]:
    source = obj.get("source")
    if isinstance(source, str):  # schema before v1.0: the source type alone
        return {"type": source}
    return _opt_obj(obj, "source", path)


def _duplicated_ids(
    initial: dict[str, Any], raw_events: list[Any], kinds: list[str], chosen: int | None
) -> set[str]:
    """StateBench fact ids written more than once (``W-AUTO``): each use gets ``#n``."""
    counts: Counter[str] = Counter()
    for pf in _opt_list(initial, "persistent_facts", "initial_state"):
        if isinstance(pf, dict) and isinstance(pf.get("id"), str):
            counts[pf["id"]] += 1
    for i in range(chosen if chosen is not None else len(raw_events)):
        if kinds[i] in ("state_write", "supersession"):
            for w in _opt_list(raw_events[i], "writes", f"events[{i}]"):
                if isinstance(w, dict) and isinstance(w.get("id"), str):
                    counts[w["id"]] += 1
    return {k for k, n in counts.items() if n > 1}


def _emit_initial_state(
    build: _Build,
    initial: dict[str, Any],
    environment: dict[str, Any],
    now: datetime | None,
    first_event: datetime | None,
) -> None:
    """Initial persistent facts, environment entries and scoped working-set items, by ts."""
    items: list[tuple[datetime, int, str, str, Any]] = []
    for i, raw in enumerate(_opt_list(initial, "persistent_facts", "initial_state")):
        path = f"initial_state.persistent_facts[{i}]"
        pf = _obj(raw, path)
        items.append((_ts(_req(pf, "ts", path), _join(path, "ts")), len(items), "pf", path, pf))
    env_ts = now if now is not None else first_event
    for name in sorted(environment):
        if name == "now" or environment[name] is None:
            continue
        path = f"initial_state.environment.{name}"
        if env_ts is None:
            build.note("environment_without_time", path)
            continue
        items.append((env_ts, len(items), "env", path, name))
    for i, raw in enumerate(_opt_list(initial, "working_set", "initial_state")):
        path = f"initial_state.working_set[{i}]"
        item = _obj(raw, path)
        content = _text(_req(item, "content", path), _join(path, "content"))
        match = _WS_SCOPE_RE.match(content)
        stamp = _ts(item["ts"], _join(path, "ts")) if item.get("ts") is not None else env_ts
        if match is None or stamp is None:
            build.note("working_set_item", path)
            continue
        items.append((stamp, len(items), "ws", path, match))
    items.sort(key=lambda entry: (entry[0], entry[1]))

    for ts, _, what, path, data in items:
        if what == "pf":
            key = _text(_req(data, "key", path), _join(path, "key"), empty=False)
            is_valid = data.get("is_valid", True)
            if not isinstance(is_valid, bool):
                raise _fail(_join(path, "is_valid"), "must be a boolean")
            _add_fact(
                build, path=path, ts=ts,
                source_id=_text(_req(data, "id", path), _join(path, "id"), empty=False),
                key=key, source_key=key,
                raw_value=_req(data, "value", path), value_path=_join(path, "value"),
                layer="persistent_facts", source=_source(data, path),
                scope=_opt_text(data, "scope", path),
                supersedes=_refs(data.get("supersedes"), _join(path, "supersedes")),
                depends_on=_refs(data.get("depends_on"), _join(path, "depends_on")),
                is_constraint=data.get("is_constraint") is True,
                is_valid=is_valid, writer_fallback="statebench",
            )
        elif what == "env":
            _add_fact(
                build, path=path, ts=ts, source_id=None,
                key=f"environment.{data}", source_key=data,
                raw_value=environment[data], value_path=path,
                layer="environment", source={"type": "environment"}, scope=None,
                supersedes=[], depends_on=[], is_constraint=False, is_valid=True,
                writer_fallback="environment", default_authority="system",
            )
        else:
            _add_fact(
                build, path=path, ts=ts, source_id=None,
                key=f"working_set.{data.group(2)}", source_key=data.group(2),
                raw_value=data.group(3), value_path=_join(path, "content"),
                layer="working_set", source={"type": "working_set"}, scope=data.group(1),
                supersedes=[], depends_on=[], is_constraint=False, is_valid=True,
                writer_fallback="working_set",
            )


def _emit_events(
    build: _Build,
    raw_events: list[Any],
    kinds: list[str],
    stamps: list[datetime],
    chosen: int | None,
) -> list[str]:
    """Asserts for the writes before the chosen query; returns the turns' texts before it."""
    end = chosen if chosen is not None else len(raw_events)
    turns: list[str] = []
    for i, raw in enumerate(raw_events):
        path = f"events[{i}]"
        kind = kinds[i]
        if kind == "conversation_turn":
            text = _opt_text(raw, "text", path)
            build.note("conversation_turn", path)
            if text and i < end:
                turns.append(text)
            marker = raw.get("implicit_supersession")
            if isinstance(marker, dict):
                build.note("implicit_supersession", _join(path, "implicit_supersession"),
                           str(marker.get("supersedes_fact_id")))
            continue
        if kind == "query":
            if i != chosen:
                build.note("other_query", path, _opt_text(raw, "prompt", path))
            continue
        writes = _list(_req(raw, "writes", path), _join(path, "writes"))
        if i > end:
            build.note("write_after_query", path)
            continue
        for j, raw_write in enumerate(writes):
            wpath = f"{path}.writes[{j}]"
            write = _obj(raw_write, wpath)
            layer = _opt_text(write, "layer", wpath) or "persistent_facts"
            if layer not in _LAYERS:
                raise _fail(_join(wpath, "layer"), f"unknown layer {layer!r}")
            key = _text(_req(write, "key", wpath), _join(wpath, "key"), empty=False)
            _add_fact(
                build, path=wpath, ts=stamps[i],
                source_id=_opt_text(write, "id", wpath) or None,
                key=key if layer == "persistent_facts" else f"{layer}.{key}", source_key=key,
                raw_value=_req(write, "value", wpath), value_path=_join(wpath, "value"),
                layer=layer, source=_source(write, wpath),
                scope=_opt_text(write, "scope", wpath),
                supersedes=_refs(write.get("supersedes"), _join(wpath, "supersedes")),
                depends_on=_refs(write.get("depends_on"), _join(wpath, "depends_on")),
                is_constraint=write.get("is_constraint") is True,
                is_valid=True, writer_fallback="user",
            )
    return turns


def _expectations(
    build: _Build,
    outcome: _Outcome,
    truth: dict[str, Any],
    gpath: str,
    admitted: set[str],
    excluded: dict[str, set[str]],
    gold: list[str],
    drift: list[str],
) -> None:
    """Fill admitted/excluded/gold/drift from the ground truth, noting what stays unmapped."""

    def sure_live(fact: _Fact) -> bool:
        return not outcome.codes[fact.id] and fact.id not in outcome.uncertain

    for name in ("decision", "reasoning", "transferable_principle"):
        if isinstance(truth.get(name), str) and truth[name].strip():
            build.note(name, _join(gpath, name))
    must = _phrases(_opt_list(truth, "must_mention", gpath), f"{gpath}.must_mention", build)
    must_not = _phrases(
        _opt_list(truth, "must_not_mention", gpath), f"{gpath}.must_not_mention", build
    )
    for where, phrases in must:
        gold.extend(phrases)
        suppliers = [f for f in build.facts if any(_mentions(f.text, p) for p in phrases)]
        live = [f for f in suppliers if sure_live(f)]
        if len(live) == 1:
            admitted.add(live[0].id)
        elif live:
            build.note("must_mention_ambiguous", where, " | ".join(f.id for f in live))
        elif suppliers:
            build.note("must_mention_only_excluded", where, phrases[0])
        else:
            build.note("must_mention_not_in_facts", where, phrases[0])
    for where, phrases in must_not:
        drift.extend(phrases)
        carriers = [f for f in build.facts if any(_mentions(f.text, p) for p in phrases)]
        if not carriers:
            build.note("must_not_mention_not_in_facts", where, phrases[0])
        for fact in carriers:
            if fact.id in outcome.uncertain:
                build.note("must_not_mention_uncertain", where, fact.id)
            elif outcome.codes[fact.id]:
                excluded[fact.id] = set(outcome.codes[fact.id])
            else:
                build.note("must_not_mention_live_fact", where, fact.id)
    drift.extend(
        _text(d, f"{gpath}.obsolete_details[{k}]")
        for k, d in enumerate(_opt_list(truth, "obsolete_details", gpath))
    )
    for k, entry in enumerate(_opt_list(truth, "required_facts", gpath)):
        where = f"{gpath}.required_facts[{k}]"
        target = entry if isinstance(entry, str) else _obj(entry, where).get("fact_id")
        needed = _find(build, _text(target, where)) if target is not None else None
        if needed is None:
            build.note("unresolved_reference", where, str(target))
        elif sure_live(needed):
            admitted.add(needed.id)
        else:
            build.note("required_fact_excluded", where, needed.id)
    forbidden = [
        (f"{gpath}.forbidden_facts[{k}]", t)
        for k, t in enumerate(_opt_list(truth, "forbidden_facts", gpath))
    ]
    detection = truth.get("supersession_detection")
    if isinstance(detection, dict):
        dpath = f"{gpath}.supersession_detection"
        forbidden += [
            (f"{dpath}.must_detect[{k}]", t)
            for k, t in enumerate(_opt_list(detection, "must_detect", dpath))
        ]
    for where, target in forbidden:
        banned = _find(build, _text(target, where))
        if banned is None:
            build.note("unresolved_reference", where, target)
        elif banned.id not in outcome.uncertain and outcome.codes[banned.id]:
            excluded[banned.id] = set(outcome.codes[banned.id])
        else:
            build.note("forbidden_fact_live", where, banned.id)
    for fact_id in sorted(admitted & set(excluded)):  # a fact both used and banned
        admitted.discard(fact_id)
        build.note("admitted_and_excluded", gpath, fact_id)


def _find(build: _Build, target: str) -> _Fact | None:
    """A fact named by the ground truth: the actor's tenant first, then any tenant."""
    found = build.resolve(target, build.tenant)
    if found is None:
        found = next((f for f in reversed(build.facts) if target in (f.source_id, f.id)), None)
    return found


def _pool(
    build: _Build, outcome: _Outcome, gold: list[str], drift: list[str]
) -> dict[str, list[str]]:
    """Gold: must-mention phrases. Drift: must-not-mention phrases and superseded values."""
    gold = _dedupe(gold)
    live_values = {
        str(f.value).casefold()
        for f in build.facts
        if not outcome.codes[f.id] and f.id not in outcome.uncertain
    }
    for fact in build.facts:
        value = str(fact.value)
        if (
            fact.id in outcome.superseder
            and value.casefold() not in live_values
            and not any(_mentions(value, g) for g in gold)
        ):
            drift.append(value)
    drift = _dedupe(drift, drop=gold)
    return {name: items for name, items in (("gold", gold), ("drift", drift)) if items}


def _pair_fields(build: _Build, case: dict[str, Any], axis: str, timeline_id: str) -> None:
    """A cf_* track names the axis; the generator's ids name the side and, by counter, the pair.

    StateBench builds each pair's positive side first, so ``X-POS-n`` pairs
    with ``X-CF-(n+1)``; both get pair ``X-n``.
    """
    case["axis"] = axis
    if axis in CF_AXES:
        case["decidable_by"] = CF_AXES[axis]
    match = _CF_ID_RE.match(timeline_id)
    if match:
        number = int(match.group("n"))
        first = number if match.group("side") == "POS" else number - 1
        if first >= 1:
            case["side"] = "positive" if match.group("side") == "POS" else "counterfactual"
            case["pair"] = f"{match.group('prefix')}-{first:0{len(match.group('n'))}d}"
    if "pair" not in case:
        build.note("pair", "id", timeline_id)


def _experience(
    build: _Build,
    case: dict[str, Any],
    expect: dict[str, Any],
    outcome: _Outcome,
    path: str,
    expected: str,
    turns: list[str],
    timeline_id: str,
) -> None:
    """Add the past experience a ground truth with ``expected_applicability`` judges.

    StateBench carries the experience only in prose; by the applicability
    track's construction it relied on the state as first written: the first
    persistent fact written by an event, else the first initial persistent fact.
    """
    own = [f for f in build.facts if f.tenant == build.tenant and f.layer == "persistent_facts"]
    written = [f for f in own if f.path.startswith("events[")]
    used = (written or own)[:1]
    if not used:
        build.note("experience_without_fact", path)
        return
    fact = used[0]
    codes = outcome.codes[fact.id]
    body: dict[str, Any] = {
        "type": "experience",
        "experience": "EXP-1",
        "content": turns[0] if turns else f"past experience of StateBench timeline {timeline_id}",
        "uses": [fact.id],
    }
    verdict: str | None
    if fact.id in outcome.uncertain:
        verdict = None
    elif not codes:
        applicability = _APPLICABILITY_FOR_VERDICT[expected]
        body["applicability"] = applicability
        case["cell"] = f"valid/{applicability}"
        build.note("experience_applicability", path, applicability)
        verdict = expected
    elif codes <= _SUBSTITUTING:
        # ADAPT when the substitution chain ends in a fact the actor is sure to get.
        end = fact.id
        while end in outcome.superseder:
            end = outcome.superseder[end]
        last = next(f for f in build.facts if f.id == end)
        if end != fact.id and not outcome.codes[end] and end not in outcome.uncertain:
            verdict = "ADAPT"
        elif end != fact.id and last.id not in outcome.uncertain:
            verdict = "REJECT"
        else:
            verdict = None
        build.note("cell", path)
    else:
        verdict = "REJECT"
        build.note("cell", path)
    assert build.last_ts is not None
    build.emit(body, build.last_ts, "statebench", build.tenant)
    if verdict is None:
        build.note("expected_applicability_uncertain", path, expected)
    elif verdict == expected:
        expect["experiences"] = {"EXP-1": expected}
    else:
        build.note("expected_applicability_conflict", path, f"{expected} vs {verdict}")


# --------------------------------------------------------------------------- #
# Files
# --------------------------------------------------------------------------- #


def _decode_line(text: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def parse_timelines(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    """Decode JSON Lines into ``(line number, timeline)`` pairs; blank lines are skipped."""
    out: list[tuple[int, dict[str, Any]]] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = _decode_line(text)
        except ValueError as exc:  # JSONDecodeError is a ValueError
            raise StatebenchError(f"not a JSON object: {exc}", line=number) from None
        except RecursionError:
            raise StatebenchError("JSON nested too deeply", line=number) from None
        if not isinstance(obj, dict):
            raise StatebenchError(f"a timeline must be a JSON object, not {_json_type(obj)}",
                                  line=number)
        out.append((number, obj))
    return out


def _dump_case(case: dict[str, Any]) -> bytes:
    return (json.dumps(case, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _dump_line(record: dict[str, Any]) -> bytes:
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def import_file(path: str | Path, out_dir: str | Path) -> ImportReport:
    """Convert every timeline of ``path`` and write ``out_dir/<id>.json`` and ``unmapped.jsonl``.

    The whole input is converted before anything is written, so a malformed
    line leaves ``out_dir`` untouched. Errors name the file, the line and the field.
    """
    try:
        return _import_file(path, out_dir)
    except StatebenchError as exc:
        raise StatebenchError(exc.message, source=str(path), line=exc.line, field=exc.field) from None


def _import_file(path: str | Path, out_dir: str | Path) -> ImportReport:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise StatebenchError(f"cannot read timelines: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise StatebenchError(f"not UTF-8: {exc.reason}", line=line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    outputs: list[tuple[str, bytes]] = []
    records: list[bytes] = []
    kinds: Counter[str] = Counter()
    seen: dict[str, int] = {}
    for number, obj in parse_timelines(text.split("\n")):
        try:
            case, record = convert_timeline(obj)
        except StatebenchError as exc:
            raise StatebenchError(exc.message, line=number, field=exc.field) from None
        if case["id"] in seen:
            raise StatebenchError(
                f"timeline id {case['id']!r} already used on line {seen[case['id']]}",
                line=number,
                field="id",
            )
        seen[case["id"]] = number
        outputs.append((f"{case['id']}.json", _dump_case(case)))
        records.append(_dump_line(record))
        kinds.update(item["kind"] for item in record["items"])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in outputs:
        (out / name).write_bytes(data)
    (out / "unmapped.jsonl").write_bytes(b"".join(records))
    return ImportReport(
        timelines=len(records),
        cases=len(outputs),
        unmapped=sum(kinds.values()),
        unmapped_by_kind=tuple(sorted(kinds.items())),
    )
