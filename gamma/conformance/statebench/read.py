"""Reading a StateBench timeline into gamma events: markers, ids and references.

The structural half of the import (SPEC.md §15): every structured fact of the
initial state and of the writes before the chosen query becomes one ``assert``.
Value markers are read here (``[RESTRICTED: label]`` as clearance or tenant,
``(valid through YYYY-MM-DD)`` as ``valid_until``, ``[SCOPE: label] key: value``
working-set items), fact ids are made unique, and ``supersedes`` /
``depends_on`` are resolved to earlier facts. Whatever only prose carries is
noted as unmapped. Part of the importer, not gamma's API:
:mod:`gamma.conformance.statebench.importer` drives it and re-exports the public constants.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from gamma.conformance.statebench.fields import (
    field_error,
    field_list,
    field_object,
    field_refs,
    field_text,
    field_time,
    field_value,
    format_time,
    join_path,
    optional_list,
    optional_object,
    optional_text,
    required_field,
)
from gamma.core.terms.policy import DEFAULT_POLICY

# The importer only reasons about outcomes under the default policy (DESIGN section 4).
AUTHORITY_LADDER: tuple[str, ...] = DEFAULT_POLICY.authority_ladder
DEFAULT_AUTHORITY = DEFAULT_POLICY.authority_default
# Clearance given to a ``[RESTRICTED: ...]`` fact: above the default
# ("public") clearance every imported actor has.
RESTRICTED_CLEARANCE = "confidential"

_LAYERS = ("persistent_facts", "working_set", "environment")

_RESTRICTED_RE = re.compile(r"^\s*\[RESTRICTED:\s*([^\]]*)\]\s*")
_TENANT_LABEL_RE = re.compile(r"^tenant_[A-Za-z0-9_.:-]+$")
_VALID_THROUGH_RE = re.compile(r"\(valid through (\d{4}-\d{2}-\d{2})\)\s*$")
_WS_SCOPE_RE = re.compile(r"^\[SCOPE:\s*([^\]]+?)\s*\]\s*([A-Za-z_][A-Za-z0-9_.]*):\s?(.*)$", re.S)


def _scope_slug(label: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.:-]+", "_", label.strip()).strip("_")
    return slug


# --------------------------------------------------------------------------- #
# Conversion state
# --------------------------------------------------------------------------- #


@attrs.define
class ImportedFact:
    """One fact as imported: its gamma event's fields and what the expectations need."""

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
class TimelineBuild:
    """Events and facts emitted so far for one timeline, plus the unmapped items."""

    tenant: str
    events: list[dict[str, Any]] = attrs.Factory(list)
    facts: list[ImportedFact] = attrs.Factory(list)
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
        return format_time(ts)

    def emit(self, body: dict[str, Any], ts: datetime, actor: str, tenant: str) -> dict[str, Any]:
        event = {"id": f"ev{len(self.events) + 1}", "ts": self.stamp(ts), "actor": actor,
                 "tenant": tenant}
        event.update(body)
        self.events.append(event)
        return event

    def resolve(self, target: str, tenant: str) -> ImportedFact | None:
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
    build: TimelineBuild,
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
) -> ImportedFact:
    value = field_value(raw_value, value_path)
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
        authority = field_text(authority, join_path(path, "source.authority"))
        if authority not in AUTHORITY_LADDER:
            build.note("authority_not_on_ladder", join_path(path, "source.authority"), authority)
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
                build.note("scope_unreadable", join_path(path, "scope"), scope)

    fact_id = _fresh_id(build, source_id, key)
    fact = ImportedFact(
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
        body["valid_until"] = format_time(valid_until)
    for name, targets, out in (
        ("supersedes", supersedes, fact.supersedes),
        ("depends_on", depends_on, fact.depends_on),
    ):
        for target in targets:
            ref = build.resolve(target, tenant)
            if ref is None:
                build.note("unresolved_reference", f"{join_path(path, name)}", target)
            elif ref.id not in out:
                out.append(ref.id)
                if name == "supersedes" and ref.rank > fact.rank:
                    build.note("supersession_below_authority", join_path(path, name), ref.id)
        if out:
            body[name] = list(out)
    if fact.depends_on:
        # StateBench links a derived fact to its inputs but states how it is derived only in
        # prose (its value is text): Γ has no derivation to recompute (issue 29), so say so.
        build.note("derivation_prose", value_path, fact_id)
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


def _fresh_id(build: TimelineBuild, source_id: str | None, key: str) -> str:
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
# The timeline's initial state and events
# --------------------------------------------------------------------------- #


def _write_source(obj: dict[str, Any], path: str) -> dict[str, Any]:
    source = obj.get("source")
    if isinstance(source, str):  # schema before v1.0: the source type alone
        return {"type": source}
    return optional_object(obj, "source", path)


def duplicated_ids(
    initial: dict[str, Any], raw_events: list[Any], kinds: list[str], chosen: int | None
) -> set[str]:
    """StateBench fact ids written more than once (``W-AUTO``): each use gets ``#n``."""
    counts: Counter[str] = Counter()
    for pf in optional_list(initial, "persistent_facts", "initial_state"):
        if isinstance(pf, dict) and isinstance(pf.get("id"), str):
            counts[pf["id"]] += 1
    for i in range(chosen if chosen is not None else len(raw_events)):
        if kinds[i] in ("state_write", "supersession"):
            for w in optional_list(raw_events[i], "writes", f"events[{i}]"):
                if isinstance(w, dict) and isinstance(w.get("id"), str):
                    counts[w["id"]] += 1
    return {k for k, n in counts.items() if n > 1}


def emit_initial_state(
    build: TimelineBuild,
    initial: dict[str, Any],
    environment: dict[str, Any],
    now: datetime | None,
    first_event: datetime | None,
) -> None:
    """Initial persistent facts, environment entries and scoped working-set items, by ts."""
    items: list[tuple[datetime, int, str, str, Any]] = []
    for i, raw in enumerate(optional_list(initial, "persistent_facts", "initial_state")):
        path = f"initial_state.persistent_facts[{i}]"
        pf = field_object(raw, path)
        written = field_time(required_field(pf, "ts", path), join_path(path, "ts"))
        items.append((written, len(items), "pf", path, pf))
    env_ts = now if now is not None else first_event
    for name in sorted(environment):
        if name == "now" or environment[name] is None:
            continue
        path = f"initial_state.environment.{name}"
        if env_ts is None:
            build.note("environment_without_time", path)
            continue
        items.append((env_ts, len(items), "env", path, name))
    for i, raw in enumerate(optional_list(initial, "working_set", "initial_state")):
        path = f"initial_state.working_set[{i}]"
        item = field_object(raw, path)
        content = field_text(required_field(item, "content", path), join_path(path, "content"))
        match = _WS_SCOPE_RE.match(content)
        stamp = (
            field_time(item["ts"], join_path(path, "ts")) if item.get("ts") is not None else env_ts
        )
        if match is None or stamp is None:
            build.note("working_set_item", path)
            continue
        items.append((stamp, len(items), "ws", path, match))
    items.sort(key=lambda entry: (entry[0], entry[1]))

    for ts, _, what, path, data in items:
        if what == "pf":
            key = field_text(required_field(data, "key", path), join_path(path, "key"), empty=False)
            is_valid = data.get("is_valid", True)
            if not isinstance(is_valid, bool):
                raise field_error(join_path(path, "is_valid"), "must be a boolean")
            _add_fact(
                build, path=path, ts=ts,
                source_id=field_text(
                    required_field(data, "id", path), join_path(path, "id"), empty=False
                ),
                key=key, source_key=key,
                raw_value=required_field(data, "value", path), value_path=join_path(path, "value"),
                layer="persistent_facts", source=_write_source(data, path),
                scope=optional_text(data, "scope", path),
                supersedes=field_refs(data.get("supersedes"), join_path(path, "supersedes")),
                depends_on=field_refs(data.get("depends_on"), join_path(path, "depends_on")),
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
                raw_value=data.group(3), value_path=join_path(path, "content"),
                layer="working_set", source={"type": "working_set"}, scope=data.group(1),
                supersedes=[], depends_on=[], is_constraint=False, is_valid=True,
                writer_fallback="working_set",
            )


def emit_events(
    build: TimelineBuild,
    raw_events: list[Any],
    kinds: list[str],
    stamps: list[datetime],
    chosen: int | None,
    *,
    last: int | None = None,
) -> list[str]:
    """Asserts for the writes before the chosen query; returns the turns' texts before it.

    Other queries are their own cases (not unmapped); a write after the ``last`` query is
    in no case, and is noted."""
    end = chosen if chosen is not None else len(raw_events)
    turns: list[str] = []
    for i, raw in enumerate(raw_events):
        path = f"events[{i}]"
        kind = kinds[i]
        if kind == "conversation_turn":
            text = optional_text(raw, "text", path)
            build.note("conversation_turn", path)
            if text and i < end:
                turns.append(text)
            marker = raw.get("implicit_supersession")
            if isinstance(marker, dict):
                build.note("implicit_supersession", join_path(path, "implicit_supersession"),
                           str(marker.get("supersedes_fact_id")))
            continue
        if kind == "query":
            continue
        writes = field_list(required_field(raw, "writes", path), join_path(path, "writes"))
        if i > end:
            if last is None or i > last:
                build.note("write_after_query", path)
            continue
        for j, raw_write in enumerate(writes):
            wpath = f"{path}.writes[{j}]"
            write = field_object(raw_write, wpath)
            layer = optional_text(write, "layer", wpath) or "persistent_facts"
            if layer not in _LAYERS:
                raise field_error(join_path(wpath, "layer"), f"unknown layer {layer!r}")
            key = field_text(
                required_field(write, "key", wpath), join_path(wpath, "key"), empty=False
            )
            _add_fact(
                build, path=wpath, ts=stamps[i],
                source_id=optional_text(write, "id", wpath) or None,
                key=key if layer == "persistent_facts" else f"{layer}.{key}", source_key=key,
                raw_value=required_field(write, "value", wpath),
                value_path=join_path(wpath, "value"),
                layer=layer, source=_write_source(write, wpath),
                scope=optional_text(write, "scope", wpath),
                supersedes=field_refs(write.get("supersedes"), join_path(wpath, "supersedes")),
                depends_on=field_refs(write.get("depends_on"), join_path(wpath, "depends_on")),
                is_constraint=write.get("is_constraint") is True,
                is_valid=True, writer_fallback="user",
            )
    return turns
