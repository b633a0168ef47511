"""Built-in reader baselines: deterministic ways of answering a case's probe.

Each reader is ``answer(case) -> str``: the value it would give for the probe key, as
text, or the one refusal phrase :data:`REFUSAL`. They are baselines for ``gamma
conformance`` and a check on the corpus itself (SPEC.md §13): every
trap must be failed by at least one lazy reader, an anti-trap by eager invalidation, a
counterfactual pair by always-answer or always-refuse, and nothing by ``reference``.

Every reader sees only the events with ``ts <= at`` (what was said before the question).
The four *lazy* readers, ``ungoverned`` and ``always-answer`` read every tenant's events
and ignore visibility: they model memory without a governance layer.

- ``latest-mention``: the value of the last ``assert`` of the key, whatever its status,
  scope, tenant, validity or fate.
- ``most-frequent``: the value mentioned most for the key (each assert of it, and each
  experience ``uses`` of a fact of the key holding it); a tie goes to the later mention.
- ``ungoverned``: Γ with tenants merged into the actor's and visibility and grants
  dropped: supersession, retraction, status, time, scope, authority and dependencies
  apply; who may see what does not.
- ``no-recompute``: ``ungoverned`` without recomputation: a derived fact (kind
  ``derived`` or with ``depends_on``) is never invalidated by its inputs, and a later
  derivation of a key that already had one is not heard.
- ``quote-stated``: Γ under the case's policy, but every stated derivation is taken at its
  word: an assert carrying a ``derivation`` loses it and its ``depends_on``, so its stated
  value is quoted, never recomputed nor invalidated by its inputs (issue 29's lazy reader).
- ``eager-invalidation``: ``ungoverned``, then an admitted fact is dropped when any later
  ``assert`` (any status, scope or tenant) mentions a related key: its own, one of its
  inputs' (transitively) or one with the same entity prefix (the key up to its last
  ``.``), even when the fact is anchored and nothing really changed.
- ``always-refuse``: always :data:`REFUSAL`.
- ``always-answer``: never refuses: the reference's value, else the latest mention, else
  the last value asserted for any key.
- ``reference``: Γ's admitted state for the key (facts needing recheck are not an
  answer); :data:`REFUSAL` when nothing is admitted.

With several probe keys, the per-key answers are joined with ``"; "`` (a single
:data:`REFUSAL` when every key refuses).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

import attrs

from gamma.conformance.cases import Case
from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.model import (
    Assert,
    Event,
    Experience,
    Grant,
    Promote,
    Revoke,
    Value,
    heard_by,
)
from gamma.scoring.grading import grade

__all__ = [
    "LAZY_READERS",
    "READERS",
    "REFUSAL",
    "Reader",
    "always_answer",
    "always_refuse",
    "answers",
    "eager_invalidation",
    "failing_readers",
    "grade_answer",
    "latest_mention",
    "most_frequent",
    "no_recompute",
    "quote_stated",
    "reference",
    "ungoverned",
    "value_text",
]

#: The one canonical refusal: what a reader says when the key has no current value.
#: Refusal gold in the corpus is ``["no current value"]``; it is also the phrase the
#: rendered context uses for known unknowns.
REFUSAL = "no current value"

Reader = Callable[[Case], str]


def value_text(value: Value) -> str:
    """A fact value as answer text: strings as is, integers in decimal, ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _join(per_key: Iterable[str | None]) -> str:
    texts = [REFUSAL if a is None else a for a in per_key]
    if all(t == REFUSAL for t in texts):
        return REFUSAL
    return "; ".join(texts)


def _values(values: Iterable[Value]) -> str | None:
    distinct: list[str] = []
    for value in values:
        text = value_text(value)
        if text not in distinct:
            distinct.append(text)
    return "; ".join(distinct) if distinct else None


def _admitted_answer(resolution: Resolution, key: str) -> str | None:
    return _values(a.value for a in resolution.admitted if a.key == key and not a.needs_recheck)


# -- the lazy readers ------------------------------------------------------------------------


def _latest(window: Sequence[Event], key: str) -> str | None:
    for event in reversed(window):
        if isinstance(event, Assert) and event.key == key and event.value is not None:
            return value_text(event.value)  # an erased value (SPEC §21) is no mention
    return None


def latest_mention(case: Case) -> str:
    """The last asserted value of the probe key, ignoring all governance."""
    window = heard_by(case.events(), case.at)
    return _join(_latest(window, key) for key in case.probe)


def _frequent(window: Sequence[Event], key: str) -> str | None:
    asserted = {e.fact: e for e in window if isinstance(e, Assert)}
    counts: Counter[str] = Counter()
    last: dict[str, int] = {}
    for pos, event in enumerate(window):
        mentioned: list[Value] = []
        if isinstance(event, Assert) and event.key == key and event.value is not None:
            mentioned.append(event.value)
        elif isinstance(event, Experience):
            for used in event.uses or ():
                fact = asserted.get(used)
                if fact is not None and fact.key == key and fact.value is not None:
                    mentioned.append(fact.value)
        for value in mentioned:
            text = value_text(value)
            counts[text] += 1
            last[text] = pos
    if not counts:
        return None
    return max(counts, key=lambda text: (counts[text], last[text]))


def most_frequent(case: Case) -> str:
    """The most mentioned value of the probe key (asserts and experience uses)."""
    window = heard_by(case.events(), case.at)
    return _join(_frequent(window, key) for key in case.probe)


def _derived(event: Assert) -> bool:
    return event.kind == "derived" or bool(event.depends_on)


def _ungoverned_log(
    case: Case, *, recompute: bool = True
) -> tuple[list[Event], dict[str, int]]:
    """The window with tenants merged, visibility and grants dropped; and commit positions.

    Without ``recompute``: ``depends_on`` is dropped and a later derivation of a key that
    already had one is moved to a private key, so it is never heard as that key.
    """
    tenant = case.actor.tenant
    out: list[Event] = []
    committed: dict[str, int] = {}
    derived_keys: set[str] = set()
    # a private key is one no event of the case uses (Γ validates the rebuilt log: no NUL in keys)
    keys = {e.key for e in case.events() if isinstance(e, Assert)}
    for event in heard_by(case.events(), case.at):
        if isinstance(event, (Grant, Revoke)):
            continue
        if isinstance(event, Assert):
            changes: dict[str, object] = {"tenant": tenant, "visibility": None}
            if not recompute:
                changes["depends_on"] = None
                changes["derivation"] = None
                if _derived(event):
                    if event.key in derived_keys:
                        private = f"{event.key}~unheard:{event.fact}"
                        while private in keys:
                            private += "~"
                        changes["key"] = private
                    derived_keys.add(event.key)
            event = attrs.evolve(event, **changes)  # type: ignore[arg-type]
            committed[event.fact] = len(out)
        else:
            if isinstance(event, Promote):
                committed[event.fact] = len(out)
            event = attrs.evolve(event, tenant=tenant)
        out.append(event)
    return out, committed


def ungoverned(case: Case) -> str:
    """Γ without visibility, grants or tenants."""
    log, _ = _ungoverned_log(case)
    resolution = resolve(log, case.actor, case.at, case.get_policy())
    return _join(_admitted_answer(resolution, key) for key in case.probe)


def no_recompute(case: Case) -> str:
    """``ungoverned`` that quotes derived values as first stated, never recomputing them."""
    log, _ = _ungoverned_log(case, recompute=False)
    resolution = resolve(log, case.actor, case.at, case.get_policy())
    return _join(_admitted_answer(resolution, key) for key in case.probe)


def _stated(event: Event) -> Event:
    if isinstance(event, Assert) and event.derivation is not None:
        return attrs.evolve(event, derivation=None, depends_on=None)
    return event


def quote_stated(case: Case) -> str:
    """Γ that quotes every stated derivation's stated value: never recomputed, never
    invalidated or restricted by its inputs; everything else governed as Γ governs it."""
    log = [_stated(event) for event in case.events()]
    resolution = resolve(log, case.actor, case.at, case.get_policy())
    return _join(_admitted_answer(resolution, key) for key in case.probe)


def _prefix(key: str) -> str:
    return key.rsplit(".", 1)[0] if "." in key else key


def eager_invalidation(case: Case) -> str:
    """``ungoverned`` that drops a fact when a related key is mentioned after it."""
    log, committed = _ungoverned_log(case)
    resolution = resolve(log, case.actor, case.at, case.get_policy())
    asserts = {e.fact: e for e in log if isinstance(e, Assert)}

    def related(fact: str) -> set[str]:
        keys: set[str] = set()
        stack, seen = [fact], set()
        while stack:
            current = stack.pop()
            if current in seen or current not in asserts:
                continue
            seen.add(current)
            keys.add(asserts[current].key)
            stack.extend(asserts[current].depends_on or ())
        prefix = _prefix(asserts[fact].key)
        keys.update(e.key for e in asserts.values() if _prefix(e.key) == prefix)
        return keys

    def stale(fact: str) -> bool:
        keys = related(fact)
        start = committed[fact]
        return any(isinstance(e, Assert) and e.key in keys for e in log[start + 1 :])

    per_key = []
    for key in case.probe:
        kept = [a.value for a in resolution.admitted if a.key == key and not a.needs_recheck
                and not stale(a.fact)]
        per_key.append(_values(kept))
    return _join(per_key)


# -- the bounds and the reference ------------------------------------------------------------


def always_refuse(case: Case) -> str:
    """Refuses every question."""
    return REFUSAL


def reference(case: Case) -> str:
    """Γ's admitted state for the probe key; the refusal when nothing is admitted."""
    resolution = case.resolve()
    return _join(_admitted_answer(resolution, key) for key in case.probe)


def always_answer(case: Case) -> str:
    """Never refuses: the reference's value, else the latest mention, else any last value."""
    answer = reference(case)
    if answer != REFUSAL:
        return answer
    answer = latest_mention(case)
    if answer != REFUSAL:
        return answer
    for event in reversed(heard_by(case.events(), case.at)):
        if isinstance(event, Assert) and event.value is not None:
            return value_text(event.value)
    return "unknown"


READERS: Mapping[str, Reader] = MappingProxyType(
    {
        "reference": reference,
        "latest-mention": latest_mention,
        "most-frequent": most_frequent,
        "no-recompute": no_recompute,
        "quote-stated": quote_stated,
        "eager-invalidation": eager_invalidation,
        "ungoverned": ungoverned,
        "always-refuse": always_refuse,
        "always-answer": always_answer,
    }
)

#: The state-tracking paper's lazy reader policies; every trap is failed by one of them.
LAZY_READERS: tuple[str, ...] = (
    "latest-mention",
    "most-frequent",
    "no-recompute",
    "eager-invalidation",
)


def answers(case: Case) -> dict[str, str]:
    """Every built-in reader's answer to ``case``, by reader name."""
    return {name: reader(case) for name, reader in READERS.items()}


def grade_answer(case: Case, answer: str) -> str:
    """The closed-pool grade of ``answer`` against the case's pool (gamma.scoring.grading.grade)."""
    if case.pool is None:
        raise ValueError(f"case {case.id!r} has no answer pool")
    return grade(answer, case.pool)


def failing_readers(case: Case) -> tuple[str, ...]:
    """The built-in readers, other than ``reference``, whose answer does not grade gold.

    This is a trap's ``signature``.
    """
    return tuple(
        sorted(
            name
            for name, reader in READERS.items()
            if name != "reference" and grade_answer(case, reader(case)) != "gold"
        )
    )
