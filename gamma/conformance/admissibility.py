"""The admissibility audit of counterfactual pairs (the governance paper's criterion).

A pair is two cases (``side`` positive and counterfactual, same ``pair``) that must differ
in exactly one governance variable and in nothing a system could read the answer off:

- both sides have the same number of events and the same event-type sequence, the same
  actor, probe time, policy, probe keys and question;
- aligned event by event, exactly one field differs, and it is a governance field (the
  *variable*); every text field (keys, values, contents, reasons), id and timestamp is the
  same, so the wording is identical;
- an engine-decidable pair (``decidable_by`` ``engine``) carries its variable in a typed
  field the engine filters on for the pair's axis (its *marker*: ``visibility`` for access
  control, ``scope`` for scope binding, ``tenant`` for actor isolation, ...);
- the ground truth differs: the two sides' gold answers are different;
- the positive side carries at least one unrelated governed decoy: a fact of a key other
  than the probe keys that the reference resolution withholds, so refusing whenever
  anything is withheld fails the positive side.

Each pair also gets two lexical similarities: ``text_similarity``, the token Jaccard of the
two sides' text fields and question (1.0 when the wording is identical), and
``similarity``, the difflib ratio of their serialized events (below 1.0 by exactly the
variable). ``audit_pairs`` returns a frozen report; a pair with any problem is rejected.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from gamma.conformance.cases import AXES, Case
from gamma.core.reading.events import event_to_json
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.model import Assert

__all__ = [
    "GOVERNANCE_FIELDS",
    "MARKERS",
    "AdmissibilityReport",
    "PairAudit",
    "audit_pairs",
]

#: Event fields that carry governance (dotted for ``visibility``); ``fact`` and ``key``
#: count only as the target of a retract, promote, grant or revoke.
GOVERNANCE_FIELDS: frozenset[str] = frozenset(
    {
        "tenant",
        "scope",
        "status",
        "authority",
        "visibility.roles",
        "visibility.actors",
        "visibility.clearance",
        "valid_from",
        "valid_until",
        "depends_on",
        "supersedes",
        "role",
        "to_actor",
        "target.fact",
        "target.key",
    }
)

_ACCESS = frozenset({"visibility.roles", "visibility.actors", "visibility.clearance", "role",
                     "to_actor", "target.fact", "target.key"})

#: Per axis, the typed fields the engine filters on: an engine-decidable pair's variable
#: must be one of them.
MARKERS: dict[str, frozenset[str]] = {
    "access_control": _ACCESS,
    "scope_binding": frozenset({"scope"}),
    "actor_isolation": frozenset({"tenant"}),
    "temporal_validity": frozenset({"valid_from", "valid_until"}),
    "supersession": frozenset({"scope", "authority", "supersedes", "valid_from", "tenant"}),
    "commitment_status": frozenset({"status", "authority", "target.fact"}),
    "dependency_validity": frozenset({"depends_on", "target.fact", "status", "valid_from",
                                      "valid_until", "scope", *_ACCESS}),
}

_TEXT_FIELDS = ("key", "value", "content", "reason")
_WORD = re.compile(r"\w+")


@attrs.frozen(kw_only=True)
class PairAudit:
    """The audit of one pair: its variable, its similarities and what is wrong with it."""

    pair: str
    axis: str | None
    decidable_by: str | None
    positive: str | None
    counterfactual: str | None
    events: int
    variable: tuple[str, ...]
    similarity: float
    text_similarity: float
    decoys: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def admissible(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "pair": self.pair,
            "axis": self.axis,
            "decidable_by": self.decidable_by,
            "positive": self.positive,
            "counterfactual": self.counterfactual,
            "events": self.events,
            "variable": list(self.variable),
            "similarity": round(self.similarity, 4),
            "text_similarity": round(self.text_similarity, 4),
            "decoys": list(self.decoys),
            "admissible": self.admissible,
            "problems": list(self.problems),
        }


@attrs.frozen
class AdmissibilityReport:
    """Every pair's audit, in pair order; ``ok`` when none is rejected."""

    pairs: tuple[PairAudit, ...]

    @property
    def admitted(self) -> tuple[PairAudit, ...]:
        return tuple(p for p in self.pairs if p.admissible)

    @property
    def rejected(self) -> tuple[PairAudit, ...]:
        return tuple(p for p in self.pairs if not p.admissible)

    @property
    def ok(self) -> bool:
        return not self.rejected

    @property
    def mean_similarity(self) -> float | None:
        return _mean(p.similarity for p in self.pairs)

    @property
    def mean_text_similarity(self) -> float | None:
        return _mean(p.text_similarity for p in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        mean, text = self.mean_similarity, self.mean_text_similarity
        return {
            "pairs": [p.to_dict() for p in self.pairs],
            "admitted": len(self.admitted),
            "rejected": len(self.rejected),
            "mean_similarity": None if mean is None else round(mean, 4),
            "mean_text_similarity": None if text is None else round(text, 4),
        }


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def audit_pairs(cases: Iterable[Case]) -> AdmissibilityReport:
    """Audit every pair among ``cases`` (cases without ``pair`` are ignored)."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        if case.pair is not None:
            groups.setdefault(case.pair, []).append(case)
    return AdmissibilityReport(tuple(_audit(pair, groups[pair]) for pair in sorted(groups)))


def _audit(pair: str, members: list[Case]) -> PairAudit:
    problems: list[str] = []
    sides: dict[str, list[Case]] = {}
    for case in members:
        sides.setdefault(case.side or "?", []).append(case)
    for side in ("positive", "counterfactual"):
        found = sides.get(side, [])
        if len(found) != 1:
            problems.append(f"needs exactly one {side} side, has {len(found)}")
    pos = sides.get("positive", [None])[0]
    neg = sides.get("counterfactual", [None])[0]
    axis = members[0].axis
    decider = members[0].decidable_by
    if pos is None or neg is None or problems:
        return PairAudit(pair=pair, axis=axis, decidable_by=decider,
                         positive=pos.id if pos else None, counterfactual=neg.id if neg else None,
                         events=0, variable=(), similarity=0.0, text_similarity=0.0, decoys=(),
                         problems=tuple(problems))
    for name in ("axis", "decidable_by", "question", "probe", "at", "actor", "policy"):
        if getattr(pos, name) != getattr(neg, name):
            problems.append(f"{name} differs between the sides")
    if pos.get_policy().digest != neg.get_policy().digest:
        problems.append("policy differs between the sides")
    if axis not in AXES:
        problems.append(f"unknown axis {axis!r}")
    a = [_flat(e) for e in pos.events()]
    b = [_flat(e) for e in neg.events()]
    if len(a) != len(b):
        problems.append(f"event count differs ({len(a)} and {len(b)})")
    types_a, types_b = [e["type"] for e in a], [e["type"] for e in b]
    if types_a != types_b:
        problems.append("event-type sequence differs")
    variable: list[str] = []
    for index, (x, y) in enumerate(zip(a, b)):
        for field in sorted(set(x) | set(y)):
            if x.get(field) != y.get(field):
                variable.append(f"events[{index}].{field}")
    fields = [v.split(".", 1)[1] for v in variable]
    wording = [v for v, f in zip(variable, fields) if f not in GOVERNANCE_FIELDS]
    if wording:
        problems.append(f"wording differs beyond the governance variable: {', '.join(wording)}")
    if not variable:
        problems.append("the sides' events are identical: no governance variable")
    elif len(variable) > 1:
        problems.append(f"more than one governance variable: {', '.join(variable)}")
    if decider == "engine" and axis in MARKERS:
        unmarked = [v for v, f in zip(variable, fields) if f not in MARKERS[axis]]
        if unmarked:
            problems.append(f"engine-decidable, but the variable is not a marker of {axis}: "
                            f"{', '.join(unmarked)}")
    gold_a = _gold(pos)
    if gold_a is None or _gold(neg) is None:
        problems.append("a side has no answer pool")
    elif gold_a == _gold(neg):
        problems.append("the ground truth is the same on both sides")
    decoys = tuple(_decoys(pos))
    if not decoys:
        problems.append("the positive side carries no unrelated governed decoy")
    return PairAudit(
        pair=pair, axis=axis, decidable_by=decider, positive=pos.id, counterfactual=neg.id,
        events=len(a), variable=tuple(variable), similarity=_similarity(pos, neg),
        text_similarity=_text_similarity(pos, neg), decoys=decoys, problems=tuple(problems),
    )


def _flat(event: Any) -> dict[str, Any]:
    """An event as written, flattened: ``visibility.roles``; targets as ``target.*``."""
    body = event_to_json(event)
    flat: dict[str, Any] = {}
    for name, value in body.items():
        if name == "visibility":
            for sub, item in value.items():
                flat[f"visibility.{sub}"] = item
        elif name in ("fact", "key") and body["type"] in ("retract", "promote", "grant", "revoke"):
            flat[f"target.{name}"] = value
        else:
            flat[name] = value
    return flat


def _gold(case: Case) -> frozenset[str] | None:
    if case.pool is None:
        return None
    return frozenset(" ".join(g.split()).casefold() for g in case.pool.gold)


def _decoys(case: Case) -> Iterator[str]:
    """Facts of keys other than the probe keys that the reference resolution withholds."""
    keys = {e.fact: e.key for e in case.events() if isinstance(e, Assert)}
    for item in case.resolve().excluded:
        if keys.get(item.fact) not in case.probe:
            yield item.fact


def _serialized(case: Case) -> str:
    return "\n".join(canonical_json(event_to_json(e)) for e in case.events())


def _similarity(a: Case, b: Case) -> float:
    return difflib.SequenceMatcher(None, _serialized(a), _serialized(b), autojunk=False).ratio()


def _words(case: Case) -> set[str]:
    words = set(_WORD.findall(case.question.casefold()))
    for event in case.events():
        body = event_to_json(event)
        for name in _TEXT_FIELDS:
            if name in body and not (name == "key" and body["type"] in ("grant", "revoke")):
                words.update(_WORD.findall(str(body[name]).casefold()))
    return words


def _text_similarity(a: Case, b: Case) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 1.0
