"""Audit record diffs: what one record admits, excludes and decides differently from another.

Kept apart from :mod:`gamma.audit` because comparing is pure and stands on its
own: ``gamma audit diff`` and replay both use it, and it reads nothing but two
JSON objects (audit records or resolution objects). :mod:`gamma.audit`
re-exports every public name here.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs

from gamma.core.resolving.render import inert
from gamma.core.terms.canonical import canonical_json

__all__ = [
    "AuditDiff", "Change", "ExperienceChange", "FactChange", "IgnoredChange", "Outcome",
    "diff_records",
]  # fmt: skip

_SECTIONS = frozenset({"admitted", "excluded", "experiences", "ignored"})


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality (``1`` is not ``true``, unlike Python's ``==``)."""
    return canonical_json(a) == canonical_json(b)


def _json_or_absent(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


@attrs.frozen
class Change:
    """One field that differs: its dotted path and its JSON value on each side (None: absent)."""

    field: str
    a: Any
    b: Any

    def __str__(self) -> str:
        return f"{self.field}: {_json_or_absent(self.a)} -> {_json_or_absent(self.b)}"


@attrs.frozen
class Outcome:
    """A fact's outcome in one record: ``admitted``, ``excluded`` (with codes) or ``absent``."""

    state: Literal["admitted", "excluded", "absent"]
    codes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"excluded: {', '.join(self.codes)}" if self.state == "excluded" else self.state


@attrs.frozen(kw_only=True)
class FactChange:
    """How one fact's outcome differs from record A to record B.

    ``change`` is ``admitted``/``excluded`` (newly so in B), ``codes`` (excluded
    in both, other codes), ``reasons`` (same codes, other events or facts),
    ``entry`` (admitted in both, other fields) or ``removed`` (absent from B).
    """

    fact: str
    key: str | None
    change: Literal["admitted", "excluded", "codes", "reasons", "entry", "removed"]
    a: Outcome
    b: Outcome
    fields: tuple[Change, ...] = ()


@attrs.frozen(kw_only=True)
class ExperienceChange:
    """An experience whose verdict, bindings or reasons differ (a verdict None: absent)."""

    experience: str
    a: str | None
    b: str | None
    fields: tuple[Change, ...] = ()


@attrs.frozen(kw_only=True)
class IgnoredChange:
    """An ``ignored`` entry listed by only one of the two records (``only_in`` "a" or "b")."""

    event: str
    code: str
    fact: str
    only_in: Literal["a", "b"]


_GROUPS: tuple[tuple[str, str], ...] = (
    ("admitted", "admitted in {b}, not in {a}"),
    ("excluded", "excluded in {b}, not in {a}"),
    ("codes", "exclusion codes changed ({a} -> {b})"),
    ("reasons", "exclusion reasons changed ({a} -> {b})"),
    ("entry", "admitted facts changed ({a} -> {b})"),
    ("removed", "listed in {a}, absent from {b}"),
)


@attrs.frozen(kw_only=True)
class AuditDiff:
    """Everything that differs from record A to record B, field by field.

    ``same`` ignores ``engine``: a record replayed by a newer gamma with the
    same outcome is the same record.
    """

    fields: tuple[Change, ...] = ()
    facts: tuple[FactChange, ...] = ()
    experiences: tuple[ExperienceChange, ...] = ()
    ignored: tuple[IgnoredChange, ...] = ()

    @property
    def same(self) -> bool:
        differs = self.facts or self.experiences or self.ignored
        return not differs and all(c.field == "engine" for c in self.fields)

    def to_dict(self) -> dict[str, Any]:
        return {"same": self.same, **attrs.asdict(self)}

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    def render(self, *, a: str = "A", b: str = "B") -> str:
        """Readable lines naming every differing field, fact, code and verdict."""
        lines = [str(c) for c in self.fields if c.field != "engine"]
        for change, title in _GROUPS:
            group = [f for f in self.facts if f.change == change]
            if group:
                lines.append(title.format(a=a, b=b) + ":")
                lines += [line for f in group for line in _fact_lines(f, a)]
        if self.experiences:
            lines.append(f"experiences changed ({a} -> {b}):")
            for x in self.experiences:
                name = inert(x.experience)
                if x.a != x.b:
                    lines.append(f"  {name}: verdict {x.a or '(absent)'} -> {x.b or '(absent)'}")
                lines += [f"  {name}: {c}" for c in x.fields]
        if self.ignored:
            lines.append("ignored entries changed:")
            for i in self.ignored:
                side = a if i.only_in == "a" else b
                lines.append(f"  {inert(i.event)} {inert(i.code)} {inert(i.fact)}: only in {side}")
        return "\n".join([*(lines or ["no differences"]), *self.notes(a=a, b=b)]) + "\n"

    def notes(self, *, a: str = "A", b: str = "B") -> list[str]:
        """Differences that do not count: the engine version."""
        engine = [c for c in self.fields if c.field == "engine"]
        return [f"note: engine {c.a} in {a}, {c.b} in {b} (not a difference)" for c in engine]


def _fact_lines(f: FactChange, a: str) -> list[str]:
    name = inert(f.fact) + ("" if f.key is None else f" {inert(f.key)}")
    if f.change in ("admitted", "removed"):
        return [f"  {name} ({a}: {f.a})"]
    if f.change == "excluded":
        return [f"  {name}: {', '.join(f.b.codes)} ({a}: {f.a})"]
    codes = [f"  {name}: {', '.join(f.a.codes)} -> {', '.join(f.b.codes)}"]
    return (codes if f.change == "codes" else []) + [f"  {name}: {c}" for c in f.fields]


_ABSENT: tuple[Outcome, dict[str, Any]] = (Outcome("absent"), {})


def _outcomes(record: dict[str, Any]) -> dict[str, tuple[Outcome, dict[str, Any]]]:
    found = {item["fact"]: (Outcome("admitted"), item) for item in record.get("admitted", ())}
    for item in record.get("excluded", ()):
        found[item["fact"]] = (Outcome("excluded", tuple(r["code"] for r in item["reasons"])), item)
    return found


def _fact_change(
    fact: str, a: tuple[Outcome, dict[str, Any]], b: tuple[Outcome, dict[str, Any]]
) -> FactChange | None:
    (one, entry_a), (two, entry_b) = a, b
    key = (entry_b or entry_a)["key"]
    if two.state == "absent":
        return FactChange(fact=fact, key=key, change="removed", a=one, b=two)
    if one.state != two.state:
        newly: Literal["admitted", "excluded"] = (
            "admitted" if two.state == "admitted" else "excluded"
        )
        return FactChange(fact=fact, key=key, change=newly, a=one, b=two)
    fields = [
        Change(name, entry_a.get(name), entry_b.get(name))
        for name in sorted(set(entry_a) | set(entry_b))
        if name != "reasons" and not _same_json(entry_a.get(name), entry_b.get(name))
    ]
    if one.state == "excluded":
        reasons_a = {r["code"]: r for r in entry_a["reasons"]}
        reasons_b = {r["code"]: r for r in entry_b["reasons"]}
        for code in sorted(set(reasons_a) & set(reasons_b)):
            for name in ("events", "facts"):
                was, now = reasons_a[code].get(name), reasons_b[code].get(name)
                if not _same_json(was, now):
                    fields.append(Change(f"reasons.{code}.{name}", was, now))
    change: Literal["entry", "codes", "reasons"] = (
        "entry" if one.state == "admitted" else "codes" if one != two else "reasons"
    )
    if change == "codes" or fields:
        return FactChange(fact=fact, key=key, change=change, a=one, b=two, fields=tuple(fields))
    return None


_ORDERS = (("admitted", "fact"), ("excluded", "fact"), ("experiences", "experience"))


def diff_records(a: dict[str, Any], b: dict[str, Any]) -> AuditDiff:
    """Compare two audit records (or resolution objects): what B admits, excludes and decides
    differently from A, and which top-level fields (``at``, ``log``, ``policy``...) changed."""
    fields: list[Change] = []
    for name in sorted((set(a) | set(b)) - _SECTIONS):
        va, vb = a.get(name), b.get(name)
        if name == "format":  # a record written before it was named is of format 1
            va, vb = a.get(name, 1), b.get(name, 1)
        if _same_json(va, vb):
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            fields += [
                Change(f"{name}.{sub}", va.get(sub), vb.get(sub))
                for sub in sorted(set(va) | set(vb))
                if not _same_json(va.get(sub), vb.get(sub))
            ]
        else:
            fields.append(Change(name, va, vb))
    for section, name in _ORDERS:
        order_a = [item[name] for item in a.get(section, ())]
        order_b = [item[name] for item in b.get(section, ())]
        if order_a != order_b and sorted(map(canonical_json, order_a)) == sorted(
            map(canonical_json, order_b)
        ):
            fields.append(Change(f"{section}.order", order_a, order_b))
    facts_a, facts_b = _outcomes(a), _outcomes(b)
    facts = [
        change
        for fact in sorted(set(facts_a) | set(facts_b))
        if (change := _fact_change(fact, facts_a.get(fact, _ABSENT), facts_b.get(fact, _ABSENT)))
    ]
    return AuditDiff(
        fields=tuple(fields),
        facts=tuple(facts),
        experiences=_experience_changes(a, b),
        ignored=_ignored_changes(a, b),
    )


def _experience_changes(a: dict[str, Any], b: dict[str, Any]) -> tuple[ExperienceChange, ...]:
    xa = {x["experience"]: x for x in a.get("experiences", ())}
    xb = {x["experience"]: x for x in b.get("experiences", ())}
    changes = []
    for name in sorted(set(xa) | set(xb)):
        one, two = xa.get(name), xb.get(name)
        verdict_a = one["verdict"] if one else None
        verdict_b = two["verdict"] if two else None
        fields: tuple[Change, ...] = ()
        if one and two:
            fields = tuple(
                Change(part, one[part], two[part])
                for part in ("bindings", "reasons")
                if not _same_json(one.get(part), two.get(part))
            )
        if verdict_a != verdict_b or fields:
            change = ExperienceChange(experience=name, a=verdict_a, b=verdict_b, fields=fields)
            changes.append(change)
    return tuple(changes)


def _ignored_changes(a: dict[str, Any], b: dict[str, Any]) -> tuple[IgnoredChange, ...]:
    ia = {(i["event"], i["code"], i["fact"]) for i in a.get("ignored", ())}
    ib = {(i["event"], i["code"], i["fact"]) for i in b.get("ignored", ())}
    changes = [IgnoredChange(event=e, code=c, fact=f, only_in="a") for e, c, f in ia - ib]
    changes += [IgnoredChange(event=e, code=c, fact=f, only_in="b") for e, c, f in ib - ia]
    return tuple(sorted(changes, key=lambda i: (i.event, i.code, i.fact, i.only_in)))
