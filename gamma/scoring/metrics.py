"""Judge-free metrics over a file of responses: GBR, URR, pairs, factorial, closed pool.

Every response is scored against a reference resolution of the log for its
actor and time (cached per actor and time), through the validator of
``gamma.findings``. Every rate is ``{"k", "n", "rate"}`` with ``rate`` null
when ``n`` is 0: an empty denominator is "n/a", never 0%.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs

from gamma.core.canonical import canonical_json, compact_json, format_ts, parse_ts
from gamma.core.convert import check_keys, converter, first_failure
from gamma.core.decisions import SUBSTITUTING_CODES
from gamma.core.errors import InputError
from gamma.core.events import decode_json, parse_actor
from gamma.core.experiences import FACTORIAL_TABLE, expected_verdict
from gamma.core.model import Event
from gamma.core.policy import DEFAULT_POLICY, Policy
from gamma.core.resolution import Resolution
from gamma.core.resolver import resolve
from gamma.scoring.findings import LogFacts, Stated, chance_to_leak, check_response, parse_stated
from gamma.scoring.grading import Pool, grade
from gamma.scoring.tokens import find

__all__ = ["FACTORIAL_TABLE", "Rate", "ResponseLine", "Score", "expected_verdict", "load_responses", "score"]

Side = Literal["positive", "counterfactual"]

@attrs.frozen(kw_only=True)
class ResponseLine:
    """One scored response (one line of RESPONSES.jsonl)."""

    case: str
    actor: dict[str, Any]
    at: str
    question: str
    response: str
    context: str | None = None
    verdict: Literal["KEEP", "ADAPT", "REJECT"] | None = None
    bindings: dict[str, str] | None = None
    experience: str | None = None
    pair: str | None = None
    side: Side | None = None
    axis: str | None = None
    decidable_by: Literal["engine", "model"] | None = None
    cell: str | None = None
    expected: Literal["KEEP", "ADAPT", "REJECT"] | None = None
    pool: dict[str, Any] | None = None


@attrs.frozen
class Rate:
    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n": self.n, "rate": self.rate}

    def __str__(self) -> str:
        return f"{self.k}/{self.n} = {self.rate:.1%}" if self.n else f"{self.k}/{self.n} = n/a"


@attrs.frozen
class Score:
    """The whole score: the JSON object of DESIGN §8 as ``to_dict()``."""

    data: dict[str, Any] = attrs.field(eq=False)
    _canonical: str = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_canonical", json.dumps(self.data, sort_keys=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Score) and self._canonical == other._canonical

    def __hash__(self) -> int:
        return hash(self._canonical)

    def to_dict(self) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(self._canonical)  # a copy: the score stays frozen
        return copy

    def to_json(self) -> str:
        return compact_json(self.data)


def load_responses(path: str | Path, *, policy: Policy | None = None) -> tuple[ResponseLine, ...]:
    """Read and validate RESPONSES.jsonl: unknown fields, duplicate cases, a pair side twice: errors."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read responses: {exc}", source=source) from None
    return parse_responses(text.split("\n"), source=source, policy=policy)


def parse_responses(
    lines: Iterable[str | Mapping[str, Any]],
    *,
    source: str | None = None,
    policy: Policy | None = None,
) -> tuple[ResponseLine, ...]:
    """Validate response lines (JSON text or objects), naming the line and field of any error."""
    result: list[ResponseLine] = []
    cases: set[str] = set()
    pairs: dict[str, dict[str, Any]] = {}
    axes: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, str) and not raw.strip():
            continue

        def fail(cls: type[InputError], message: str, field: str | None, line: int = number) -> InputError:
            return cls(message, source=source, line=line, field=field)

        obj = decode_json(raw, source=source, line=number) if isinstance(raw, str) else dict(raw)
        if not isinstance(obj, dict):
            raise fail(InputError, "a response line must be a JSON object", None)
        check_keys(obj, ResponseLine, fail)
        try:
            item = converter.structure(obj, ResponseLine)
        except cattrs.BaseValidationError as exc:
            field, message = first_failure(exc)
            raise fail(InputError, message, field) from None
        _check_line(item, policy or DEFAULT_POLICY, fail)
        if item.case in cases:
            raise fail(InputError, f"case {item.case!r} appears twice", "case")
        cases.add(item.case)
        if item.pair is not None:
            _check_pair(item, pairs, axes, fail)
        result.append(item)
    return tuple(result)


def _check_line(item: ResponseLine, policy: Policy, fail: Any) -> None:
    """The checks of one line on its own: case, actor, time, pair fields, cell, pool."""
    if not item.case:
        raise fail(InputError, "must be a non-empty string", "case")
    try:
        parse_actor(item.actor, policy=policy)
    except InputError as exc:
        raise fail(type(exc), exc.message, f"actor.{exc.field}" if exc.field else "actor") from None
    try:
        parse_ts(item.at)
    except ValueError as exc:
        raise fail(InputError, str(exc), "at") from None
    if (item.pair is None) != (item.side is None):
        raise fail(InputError, "give both 'pair' and 'side', or neither", "side")
    if item.pair is not None and item.pool is None:
        raise fail(InputError, "a pair side is graded against its pool: give 'pool'", "pool")
    if item.cell is not None:
        try:
            expected_verdict(item.cell)
        except ValueError as exc:
            raise fail(InputError, str(exc), "cell") from None
    if item.pool is not None:
        try:
            Pool.from_json(item.pool)
        except (ValueError, TypeError) as exc:
            raise fail(InputError, str(exc), "pool") from None


def _check_pair(item: ResponseLine, pairs: dict[str, dict[str, Any]], axes: dict[str, str], fail: Any) -> None:
    """A pair has each side once, one axis, and an axis one ``decidable_by`` (unstated inherits)."""
    assert item.pair is not None and item.side is not None
    seen = pairs.setdefault(item.pair, {"sides": set(), "axis": None, "decidable_by": None})
    if item.side in seen["sides"]:
        raise fail(InputError, f"pair {item.pair!r} has its {item.side} side twice", "side")
    seen["sides"].add(item.side)
    for field in ("axis", "decidable_by"):
        value = getattr(item, field)
        if value is not None and seen[field] not in (None, value):
            raise fail(InputError, f"pair {item.pair!r} has {field} {seen[field]!r} on its other side", field)
        seen[field] = seen[field] or value
    axis, decidable = seen["axis"], seen["decidable_by"]
    if axis is not None and decidable is not None and axes.setdefault(axis, decidable) != decidable:
        raise fail(InputError, f"axis {axis!r} is decidable by {axes[axis]!r} elsewhere", "decidable_by")


def score(
    responses: Sequence[ResponseLine | Mapping[str, Any]] | str | Path,
    events: Sequence[Event],
    *,
    policy: Policy | None = None,
) -> Score:
    """Score one system's responses against reference resolutions of the validated log
    ``events`` (``gamma.score`` also takes a path, and a store's own policy).

    ``responses`` is a RESPONSES.jsonl path, or a sequence of ``ResponseLine``
    or of response objects (dicts, validated as lines are).
    """
    policy = policy or DEFAULT_POLICY
    if isinstance(responses, (str, Path)):
        lines = load_responses(responses, policy=policy)
    else:  # checked as lines of a file are: duplicate cases, pair sides, cells...
        lines = parse_responses([_as_object(r) for r in responses], source="<responses>", policy=policy)
    facts = LogFacts(events)
    cache: dict[str, Resolution] = {}
    per_response = []
    for line in lines:
        resolution = _reference(events, line, policy, cache)
        stated = parse_stated(line.response, verdict=line.verdict, bindings=line.bindings)
        try:
            violations = check_response(
                resolution, facts, question=line.question, stated=stated,
                context=line.context, experience=line.experience,
            )
        except InputError as exc:
            raise InputError(exc.message, source=f"case {line.case!r}", field=exc.field) from None
        per_response.append((line, resolution, stated, violations))
    return Score(_aggregate(per_response, facts))


def _as_object(item: ResponseLine | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(item, ResponseLine):
        return {k: v for k, v in converter.unstructure(item).items() if v is not None}
    return item


def _reference(
    events: Sequence[Event], line: ResponseLine, policy: Policy, cache: dict[str, Resolution]
) -> Resolution:
    """Γ(log, actor, at) for a line already validated, computed once per actor and time."""
    actor = parse_actor(line.actor, policy=policy)
    at = parse_ts(line.at)
    key = canonical_json([converter.unstructure(actor), format_ts(at)])
    if key not in cache:
        cache[key] = resolve(events, actor, at, policy)
    return cache[key]


def _aggregate(rows: list[tuple[Any, Resolution, Stated, Any]], facts: LogFacts) -> dict[str, Any]:
    findings = []
    leaked = 0
    conditional_n = conditional_k = 0
    by_reason: Counter[str] = Counter()
    unsupported = 0
    for line, resolution, _, violations in rows:
        bypasses = [v for v in violations if v.kind == "bypass"]
        if bypasses:
            leaked += 1
            for code in sorted({c for v in bypasses for c in v.codes}):
                by_reason[code] += 1
        if _chance_to_leak(resolution, facts, line.question):
            conditional_n += 1
            conditional_k += bool(bypasses)
        unsupported += any(v.kind == "unsupported" for v in violations)
        order = sorted(violations, key=lambda v: (v.kind, v.fact or "", v.experience or ""))
        findings += [{"response": line.case, **v.to_dict()} for v in order]
    n = len(rows)
    return {
        "responses": n,
        "gbr": {
            **Rate(leaked, n).to_dict(),
            "conditional": Rate(conditional_k, conditional_n).to_dict(),
            "by_reason": dict(sorted(by_reason.items())),
        },
        "urr": Rate(unsupported, n).to_dict(),
        "pairs": _pairs(rows),
        "factorial": _factorial(rows, facts),
        "pool": _pool(rows),
        "findings": findings,  # in response order; within one, by kind then fact
    }


def _chance_to_leak(resolution: Resolution, facts: LogFacts, question: str) -> bool:
    """Whether the reference withholds a fact with a form not exempted (DESIGN §8)."""
    return chance_to_leak(resolution, facts, question)


def _pairs(rows: list[tuple[Any, Resolution, Stated, Any]]) -> dict[str, Any]:
    """Pair accuracy of scored lines; a side is right when its prose grades gold."""
    return pair_table(
        (line.pair, line.side, line.axis, line.decidable_by,
         grade(stated.text, Pool.from_json(line.pool)) == "gold")
        for line, _, stated, _ in rows
        if line.pair is not None
    )


def pair_table(sides: Iterable[tuple[str, str, str | None, str | None, bool]]) -> dict[str, Any]:
    """Pair accuracy per axis from ``(pair, side, axis, decidable_by, correct)`` rows.

    Sides are matched by pair id, never by position; a pair with one side is
    ``incomplete``. An axis is decidable by what any of its sides says.
    """
    rows = list(sides)
    got: dict[str, dict[str, bool]] = defaultdict(dict)
    axis_of: dict[str, str | None] = {}
    for pair, side, axis, _, correct in rows:
        got[pair][side] = correct
        axis_of[pair] = axis_of.get(pair) or axis
    decidable: dict[str, str | None] = {}
    for pair, _, _, decider, _ in rows:
        axis = axis_of[pair] or "unknown"
        decidable[axis] = decidable.get(axis) or decider
    counts: dict[str, Counter[str]] = {}
    for pair in sorted(got):
        c = counts.setdefault(axis_of[pair] or "unknown", Counter())
        both = got[pair]
        if len(both) < 2:
            c["incomplete"] += 1
            continue
        c["pairs"] += 1
        c["both"] += both["positive"] and both["counterfactual"]
        c["positive"] += both["positive"]
        c["counterfactual"] += both["counterfactual"]
    return {
        axis: {
            "decidable_by": decidable[axis],
            "pairs": c["pairs"],
            "incomplete": c["incomplete"],
            "pair_accuracy": Rate(c["both"], c["pairs"]).to_dict(),
            "positive": Rate(c["positive"], c["pairs"]).to_dict(),
            "counterfactual": Rate(c["counterfactual"], c["pairs"]).to_dict(),
            # Δ = positive rate − counterfactual rate, as one division (no float drift)
            "delta": (c["positive"] - c["counterfactual"]) / c["pairs"] if c["pairs"] else None,
        }
        for axis, c in sorted(counts.items())
    }


def _factorial(rows: list[tuple[Any, Resolution, Stated, Any]], facts: LogFacts) -> dict[str, Any]:
    n = correct = 0
    rejects = rejected_right = 0
    answers = refused_wrong = 0
    adapts = carried = 0
    for line, resolution, stated, _ in rows:
        expected = line.expected or (expected_verdict(line.cell) if line.cell else None)
        if expected is None:
            continue
        n += 1
        correct += stated.verdict == expected
        if expected == "REJECT":
            rejects += 1
            rejected_right += stated.verdict == "REJECT"
        else:
            answers += 1
            refused_wrong += stated.verdict == "REJECT"
        if expected == "ADAPT":
            adapts += 1
            carried += _carries_detail(line, resolution, stated, facts)
    return {
        "n": n,
        "accuracy": Rate(correct, n).to_dict(),
        "correct_rejection": Rate(rejected_right, rejects).to_dict(),
        "false_refusal": Rate(refused_wrong, answers).to_dict(),
        "detail_carryover": Rate(carried, adapts).to_dict(),
        "always_refuse_accuracy": Rate(rejects, n).to_dict(),
    }


def _carries_detail(line: Any, resolution: Resolution, stated: Stated, facts: LogFacts) -> bool:
    """The response asserts a token of a substituted used fact that no admitted fact supplies."""
    from gamma.scoring.tokens import extract

    if line.experience is None:
        return False
    outcome = next((x for x in resolution.experiences if x.experience == line.experience), None)
    if outcome is None:
        return False
    substituted = sorted({r.fact for r in outcome.reasons if r.code in SUBSTITUTING_CODES})
    admitted = tuple(t for a in resolution.admitted for t in facts.tokens(a.fact))
    said = [t for t in extract(stated.text) if not t.negated]
    return any(
        find(token, said) and not find(token, admitted)
        for fact in substituted
        for token in facts.tokens(fact)
    )


def _pool(rows: list[tuple[Any, Resolution, Stated, Any]]) -> dict[str, int]:
    counts = {"n": 0, "gold": 0, "drift": 0, "other": 0, "off_pool": 0, "ambiguous": 0}
    for line, _, stated, _ in rows:
        if line.pool is None:
            continue
        counts["n"] += 1
        counts[grade(stated.text, Pool.from_json(line.pool))] += 1
    return counts
