"""Deriving a case's expectations from StateBench ground truth, only where sure.

What gamma's default policy makes of the imported facts is worked out here by a
small, conservative reading of DESIGN section 5 (:func:`derive_outcome`); a ground-truth
mention, required or forbidden fact, or ``expected_applicability`` becomes an
expectation only when that reading makes the outcome certain. Everything else is
noted as unmapped, never guessed. Part of the importer, not gamma's API:
:mod:`gamma.conformance.statebench.importer` calls it once the facts are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from gamma.conformance.statebench.fields import (
    field_object,
    field_text,
    join_path,
    optional_list,
    required_field,
)
from gamma.conformance.statebench.read import ImportedFact, TimelineBuild
from gamma.core.terms.decisions import SUBSTITUTING_CODES, VALIDITY_CODES

# expected_applicability -> the experience applicability that yields it when
# the state is valid (the paper's table, valid row).
APPLICABILITY_FOR_VERDICT = {"KEEP": "applicable", "ADAPT": "adaptable", "REJECT": "unusable"}

_SUBSTITUTING = SUBSTITUTING_CODES
_VALIDITY = VALIDITY_CODES
# A dependency excluded for one of these is hidden from the actor: its dependents are restricted.
_RESTRICTS_DEPENDENTS = frozenset({"access_denied", "dependency_restricted"})


def mentions_phrase(text: str, phrase: str) -> bool:
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
# What gamma's default policy makes of the emitted facts
# --------------------------------------------------------------------------- #


@attrs.define
class DerivedOutcome:
    """Each fact's exclusion codes, the facts left uncertain, and who superseded whom."""

    codes: dict[str, set[str]]
    uncertain: set[str]
    superseder: dict[str, str]


def derive_outcome(facts: list[ImportedFact], tenant: str, at: datetime) -> DerivedOutcome:
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
    by_key: dict[str, list[ImportedFact]] = {}
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
            if codes[dep] & _RESTRICTS_DEPENDENTS:
                codes[fact.id].add("dependency_restricted")
    return DerivedOutcome(codes=codes, uncertain=uncertain, superseder=superseder)


# --------------------------------------------------------------------------- #
# Expectations from the ground truth
# --------------------------------------------------------------------------- #


def _phrases(entries: list[Any], path: str, build: TimelineBuild) -> list[tuple[str, list[str]]]:
    """Ground-truth mention requirements as (path, phrases); regexes are noted, not used."""
    out: list[tuple[str, list[str]]] = []
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if isinstance(entry, str):
            if entry.strip():
                out.append((where, [field_text(entry, where)]))
            continue
        req = field_object(entry, where)
        phrase = field_text(required_field(req, "phrase", where), join_path(where, "phrase"))
        alternatives = [
            field_text(a, f"{where}.alternatives[{j}]")
            for j, a in enumerate(optional_list(req, "alternatives", where))
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


def fill_expectations(
    build: TimelineBuild,
    outcome: DerivedOutcome,
    truth: dict[str, Any],
    gpath: str,
    admitted: set[str],
    excluded: dict[str, set[str]],
    gold: list[str],
    drift: list[str],
) -> None:
    """Fill admitted/excluded/gold/drift from the ground truth, noting what stays unmapped."""

    def sure_live(fact: ImportedFact) -> bool:
        return not outcome.codes[fact.id] and fact.id not in outcome.uncertain

    for name in ("decision", "reasoning", "transferable_principle"):
        if isinstance(truth.get(name), str) and truth[name].strip():
            build.note(name, join_path(gpath, name))
    must = _phrases(optional_list(truth, "must_mention", gpath), f"{gpath}.must_mention", build)
    must_not = _phrases(
        optional_list(truth, "must_not_mention", gpath), f"{gpath}.must_not_mention", build
    )
    for where, phrases in must:
        gold.extend(phrases)
        suppliers = [f for f in build.facts if any(mentions_phrase(f.text, p) for p in phrases)]
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
        carriers = [f for f in build.facts if any(mentions_phrase(f.text, p) for p in phrases)]
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
        field_text(d, f"{gpath}.obsolete_details[{k}]")
        for k, d in enumerate(optional_list(truth, "obsolete_details", gpath))
    )
    for k, entry in enumerate(optional_list(truth, "required_facts", gpath)):
        where = f"{gpath}.required_facts[{k}]"
        target = entry if isinstance(entry, str) else field_object(entry, where).get("fact_id")
        needed = _find(build, field_text(target, where)) if target is not None else None
        if needed is None:
            build.note("unresolved_reference", where, str(target))
        elif sure_live(needed):
            admitted.add(needed.id)
        else:
            build.note("required_fact_excluded", where, needed.id)
    forbidden = [
        (f"{gpath}.forbidden_facts[{k}]", t)
        for k, t in enumerate(optional_list(truth, "forbidden_facts", gpath))
    ]
    detection = truth.get("supersession_detection")
    if isinstance(detection, dict):
        dpath = f"{gpath}.supersession_detection"
        forbidden += [
            (f"{dpath}.must_detect[{k}]", t)
            for k, t in enumerate(optional_list(detection, "must_detect", dpath))
        ]
    for where, target in forbidden:
        banned = _find(build, field_text(target, where))
        if banned is None:
            build.note("unresolved_reference", where, target)
        elif banned.id not in outcome.uncertain and outcome.codes[banned.id]:
            excluded[banned.id] = set(outcome.codes[banned.id])
        else:
            build.note("forbidden_fact_live", where, banned.id)
    for fact_id in sorted(admitted & set(excluded)):  # a fact both used and banned
        admitted.discard(fact_id)
        build.note("admitted_and_excluded", gpath, fact_id)


def _find(build: TimelineBuild, target: str) -> ImportedFact | None:
    """A fact named by the ground truth: the actor's tenant first, then any tenant."""
    found = build.resolve(target, build.tenant)
    if found is None:
        found = next((f for f in reversed(build.facts) if target in (f.source_id, f.id)), None)
    return found


def answer_pool(
    build: TimelineBuild, outcome: DerivedOutcome, gold: list[str], drift: list[str]
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
            and not any(mentions_phrase(value, g) for g in gold)
        ):
            drift.append(value)
    drift = _dedupe(drift, drop=gold)
    return {name: items for name, items in (("gold", gold), ("drift", drift)) if items}


def add_experience(
    build: TimelineBuild,
    case: dict[str, Any],
    expect: dict[str, Any],
    outcome: DerivedOutcome,
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
        applicability = APPLICABILITY_FOR_VERDICT[expected]
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
