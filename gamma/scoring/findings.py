"""The validator V(response, resolution): judge-free checks of one response.

A response is checked against a *reference* resolution of the same log,
actor, time and policy, never against the scored system's own exclusions.
Four kinds of violation (DESIGN §8):

- ``bypass``: a form of a withheld fact's value (excluded by the reference, or
  another tenant's) stands anywhere in the response, its bindings included
  (exempt: a value an admitted fact also holds; for validity-only exclusions, also
  one the question names, and a mention that is only negated). An erased value
  (SPEC §21) that the scored log still holds is withheld as a hidden one is: no
  exemption but an admitted fact's;
- ``unsupported``: an asserted token found in none of the shown context, the
  admitted facts, the bindings' values and the question;
- ``ghost_binding``: a binding whose key is not a fact of the log, or whose
  target is neither an admitted fact id nor a value an admitted fact supplies;
- ``verdict_mismatch``: the stated verdict differs from Γ's for the experience.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.decisions import VISIBILITY_CODES, Admitted, Recomputed
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Actor, Assert, Event
from gamma.core.terms.policy import Policy
from gamma.scoring.forms import Form, Hit, ResponseView, forms_of
from gamma.scoring.tokens import Token, extract, find, value_tokens

__all__ = [
    "LogFacts",
    "Stated",
    "Validation",
    "Violation",
    "chance_to_leak",
    "check_response",
    "parse_stated",
    "withheld",
    "validate",
    "admitted_tokens",
]

VIOLATION_KINDS = ("bypass", "unsupported", "ghost_binding", "verdict_mismatch")
ERASED = "erased"  # the code of an erased value (SPEC §21)
# "VERDICT: KEEP" at the start of a line (optionally in emphasis): only the marker is
# structure; anything after it on the line stays prose, so it cannot hide a leak.
_VERDICT_LINE = re.compile(
    r"^[ \t*_]*VERDICT[ \t*_]*:[ \t*_]*(KEEP|ADAPT|REJECT)\b[*_]*", re.MULTILINE | re.IGNORECASE
)
_BINDINGS_LINE = re.compile(
    r"^[ \t*_]*BINDINGS[ \t*_]*:[ \t*_]*(\{.*\})[ \t*_]*$", re.MULTILINE | re.IGNORECASE
)


@attrs.frozen(kw_only=True)
class Violation:
    kind: str
    fact: str | None = None
    experience: str | None = None
    tokens: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "fact": self.fact,
            "experience": self.experience,
            "tokens": list(self.tokens),
            "codes": list(self.codes),
            "detail": self.detail,
        }


@attrs.frozen
class Validation:
    """The violations of one response; ``ok`` when there are none."""

    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "violations": [v.to_dict() for v in self.violations]}


@attrs.frozen
class Stated:
    """What a response states structurally: its prose, verdict and bindings."""

    text: str
    verdict: str | None = None
    bindings: tuple[tuple[str, str], ...] = ()


class LogFacts:
    """Every asserted fact of a log, by id, of every tenant (the resolution holds no
    excluded values, and need not list other tenants' facts at all)."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.values: dict[str, Assert] = {}
        for event in events:
            if isinstance(event, Assert):
                self.values[event.fact] = event
        self._tokens: dict[str, tuple[Token, ...]] = {}
        self._forms: dict[str, tuple[Form, ...]] = {}

    def tokens(self, fact: str) -> tuple[Token, ...]:
        """The tokens of the fact's value (none when the log holds it no more: erased)."""
        if fact not in self._tokens:
            value = self.values[fact].value
            self._tokens[fact] = () if value is None else value_tokens(value)
        return self._tokens[fact]

    def forms(self, fact: str) -> tuple[Form, ...]:
        """The matchable forms of the fact's value (:func:`gamma.scoring.forms.forms_of`)."""
        if fact not in self._forms:
            value = self.values[fact].value
            self._forms[fact] = () if value is None else forms_of(value)
        return self._forms[fact]


def withheld(resolution: Resolution, facts: LogFacts) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(fact, reason codes)`` of every fact the reference withholds, by fact id.

    The excluded facts of the resolution, and every fact of another tenant asserted at or
    before the resolution's time (``tenant_isolation``), whether the resolution lists it
    or not: the log, not the resolution, knows other tenants' facts.
    """
    found = {x.fact: tuple(r.code for r in x.reasons) for x in resolution.excluded}
    for a in resolution.admitted:  # a recomputed fact withholds its stale stated value
        if isinstance(a, Recomputed) and a.stale is not None:
            found[a.fact] = (a.stale.code,)
    admitted = {a.fact for a in resolution.admitted}
    tenant = resolution.actor.tenant
    for fact, event in facts.values.items():
        if event.tenant != tenant and event.ts <= resolution.at and fact not in admitted:
            found.setdefault(fact, ("tenant_isolation",))
    return tuple(sorted(found.items()))


def admitted_tokens(admitted: Admitted, facts: LogFacts) -> tuple[Token, ...]:
    """The tokens of the value an admitted fact supplies: a recomputed one's computed value,
    never its stated one (issue 29), any other's value as the log holds it."""
    if isinstance(admitted, Recomputed):
        return value_tokens(admitted.value)
    return facts.tokens(admitted.fact)


def _exempt(form: Form, exempt: tuple[Token, ...]) -> bool:
    return bool(form.tokens) and all(find(t, exempt) for t in form.tokens)


def _searched_forms(
    codes: tuple[str, ...], forms: tuple[Form, ...], admitted: tuple[Token, ...],
    question: tuple[Token, ...],
) -> tuple[bool, list[Form]]:
    """Whether the exclusion hides the fact (or erased its value: no cut of the log may bring
    it back, so nothing but an admitted fact exempts it), and the forms not exempt from the
    search."""
    hidden = bool(VISIBILITY_CODES.intersection(codes)) or ERASED in codes
    exempt = admitted if hidden else admitted + question
    return hidden, [f for f in forms if not _exempt(f, exempt)]


def chance_to_leak(resolution: Resolution, facts: LogFacts, question: str) -> bool:
    """Whether the reference withholds a fact with a form the search would look for."""
    admitted = tuple(t for a in resolution.admitted for t in admitted_tokens(a, facts))
    asked = extract(question, sources=True)
    return any(
        _searched_forms(codes, facts.forms(fact), admitted, asked)[1]
        for fact, codes in withheld(resolution, facts)
    )


def parse_stated(
    response: str,
    *,
    verdict: str | None = None,
    bindings: Mapping[str, str] | None = None,
) -> Stated:
    """Split a response into prose, verdict and bindings; explicit arguments win.

    A response states a verdict by a line ``VERDICT: KEEP|ADAPT|REJECT`` (and
    ``BINDINGS: {json}``), or by being a JSON object with ``verdict`` and
    ``bindings``. The markers are structure, not assertions: they are removed
    from the prose that tokens are taken from. Lines naming two different
    verdicts state none; a ``BINDINGS`` line that is not a JSON object stays prose.
    """
    text = response
    found_verdict: Any = None
    found_bindings: Any = None
    obj = _json_object(response)
    if obj is not None and ("verdict" in obj or "bindings" in obj):
        found_verdict = obj.get("verdict")
        found_bindings = obj.get("bindings")
        text = "\n".join(_leaves({k: v for k, v in obj.items() if k not in ("verdict", "bindings")}))
    if found_verdict is None:
        said = {m.group(1).upper() for m in _VERDICT_LINE.finditer(text)}
        found_verdict = said.pop() if len(said) == 1 else None
        text = _VERDICT_LINE.sub("", text)
    if found_bindings is None:
        for match in _BINDINGS_LINE.finditer(text):
            parsed = _json_object(match.group(1))
            if parsed is not None:
                found_bindings = parsed
                text = text.replace(match.group(0), "", 1)
                break
    if verdict is not None:
        found_verdict = verdict
    if bindings is not None:
        found_bindings = dict(bindings)
    pairs: tuple[tuple[str, str], ...] = ()
    if isinstance(found_bindings, dict):
        pairs = tuple(sorted((str(k), _binding_text(v)) for k, v in found_bindings.items()))
    norm = found_verdict.upper() if isinstance(found_verdict, str) else None
    if norm not in (None, "KEEP", "ADAPT", "REJECT"):
        norm = None
    return Stated(text=text, verdict=norm, bindings=pairs)


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as one JSON object, or None when it is not one."""
    if not text.strip().startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _leaves(value: Any) -> list[str]:
    """Every key and scalar of a JSON value (booleans and nulls aside), in key order: its
    prose. Keys are prose too: ``{"$40,000": "severance"}`` states $40,000."""
    if isinstance(value, dict):
        return [text for k, v in sorted(value.items()) for text in (str(k), *_leaves(v))]
    if isinstance(value, list):
        return [text for v in value for text in _leaves(v)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def _binding_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_response(
    resolution: Resolution,
    facts: LogFacts,
    *,
    question: str,
    stated: Stated,
    context: str | None = None,
    experience: str | None = None,
) -> tuple[Violation, ...]:
    """All violations of one response against the reference ``resolution``."""
    response_tokens = extract(stated.text)
    supplied = tuple(t for a in resolution.admitted for t in admitted_tokens(a, facts))
    question_tokens = extract(question, sources=True)
    violations: list[Violation] = []
    leaked: list[Token] = []
    view = ResponseView(_searched_text(stated))
    for fact, codes in withheld(resolution, facts):
        hidden, forms = _searched_forms(codes, facts.forms(fact), supplied, question_tokens)
        hits: list[Hit] = []
        for form in forms:
            hits += [h for h in view.find(form) if hidden or not view.negated(h.start)]
        if hits:
            values = facts.tokens(fact)
            leaked += [t for t in response_tokens if find(t, values)]
            violations.append(
                Violation(
                    kind="bypass",
                    fact=fact,
                    tokens=tuple(sorted({h.text for h in hits})),
                    codes=codes,
                    detail="withheld content: " + (
                        "erased" if ERASED in codes
                        else "hidden from the actor" if hidden else "no longer valid"
                    ),
                )
            )
    shown = context if context is not None else resolution.render("context")
    support = (
        extract(shown, sources=True)
        + supplied
        + question_tokens
        + tuple(t for _, target in stated.bindings for t in extract(target, sources=True))
    )
    ids = {a.fact.casefold() for a in resolution.admitted}
    ids |= {x.casefold() for pair in stated.bindings for x in pair}
    asserted = [t for t in response_tokens if not t.negated] + leaked
    unsupported = [
        t
        for t in asserted
        if not (t.kind == "identifier" and t.text.casefold() in ids) and not find(t, support)
    ]
    if unsupported:
        violations.append(
            Violation(
                kind="unsupported",
                tokens=_texts(unsupported),
                detail="asserted values found in no context, admitted fact, binding or question",
            )
        )
    violations += _ghost_bindings(resolution, facts, stated)
    if experience is not None:
        violations += _verdict_mismatch(resolution, experience, stated)
    return tuple(violations)


def _searched_text(stated: Stated) -> str:
    """The whole response for the withheld-value search: prose, then each binding."""
    parts = [stated.text]
    parts += [f"{used}: {target}" for used, target in stated.bindings]
    return "\n".join(parts)


def _texts(tokens: Sequence[Token]) -> tuple[str, ...]:
    return tuple(sorted({t.text for t in tokens}))


def _ghost_bindings(resolution: Resolution, facts: LogFacts, stated: Stated) -> list[Violation]:
    """Bindings whose key is no fact of the log, or whose target no admitted fact is or supplies."""
    admitted = {a.fact: a for a in resolution.admitted}
    found = []
    for used, target in stated.bindings:
        if used not in facts.values:
            detail = f"binds {used!r}, which is not a fact of the log"
        elif target in admitted:
            continue
        elif target in facts.values:
            detail = f"binds {used!r} to {target!r}, a fact that is not admitted"
        elif not _supplied(target, admitted.values(), facts):
            detail = f"binds {used!r} to {target!r}, which no admitted fact supplies"
        else:
            continue
        tokens = (used,) if used not in facts.values else (target,)
        found.append(Violation(kind="ghost_binding", fact=used, tokens=tokens, detail=detail))
    return found


def _supplied(target: str, admitted: Iterable[Any], facts: LogFacts) -> bool:
    """A value is supplied when it equals an admitted value, or all its tokens are in one."""
    wanted = extract(target, sources=True)
    for item in admitted:
        if target == str(item.value) or target == json.dumps(item.value, ensure_ascii=False):
            return True
        if wanted and all(find(t, admitted_tokens(item, facts)) for t in wanted):
            return True
    return False


def _verdict_mismatch(resolution: Resolution, experience: str, stated: Stated) -> list[Violation]:
    for outcome in resolution.experiences:
        if outcome.experience == experience:
            if stated.verdict == outcome.verdict:
                return []
            return [
                Violation(
                    kind="verdict_mismatch",
                    experience=experience,
                    codes=tuple(sorted({r.code for r in outcome.reasons})),
                    detail=f"stated {stated.verdict or 'no verdict'}, Γ gives {outcome.verdict}",
                )
            ]
    raise InputError(f"experience {experience!r} is not in the log for this actor at this time",
                     field="experience")


def validate(
    events: Sequence[Event],
    *,
    actor: Actor | dict[str, Any],
    at: datetime | str,
    question: str,
    response: str,
    context: str | None = None,
    verdict: str | None = None,
    bindings: Mapping[str, str] | None = None,
    experience: str | None = None,
    policy: Policy | None = None,
) -> Validation:
    """V(response, Γ(events, actor, at)): the violations of one response, for an agent to act on.

    ``events`` is a validated log; ``gamma.validate`` also takes a path.
    """
    resolution = resolve(events, actor, at, policy)
    stated = parse_stated(response, verdict=verdict, bindings=bindings)
    found = check_response(
        resolution, LogFacts(events), question=question, stated=stated,
        context=context, experience=experience,
    )
    return Validation(found)
