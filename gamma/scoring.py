"""Judge-free metrics over a file of responses: GBR, URR, pairs, factorial, closed pool.

Every response is scored against a reference resolution of the log for its
actor and time (cached per actor and time), through the validator of
``gamma.findings``. Every rate is ``{"k", "n", "rate"}`` with ``rate`` null
when ``n`` is 0: an empty denominator is "n/a", never 0%.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs

from .canonical import canonical_json, format_ts
from .convert import check_keys, converter, first_failure
from .errors import InputError
from .events import decode_json, parse_actor
from .findings import LogFacts, Stated, check_response, parse_stated
from .grading import Pool, grade
from .model import Actor, Event
from .policy import DEFAULT_POLICY, Policy
from .resolution import SUBSTITUTING_CODES, Resolution
from .resolver import resolve
from .tokens import find

__all__ = ["ResponseLine", "Score", "Rate", "score", "load_responses", "FACTORIAL_TABLE", "expected_verdict"]

Side = Literal["positive", "counterfactual"]

# The governance x applicability table of the governance paper (SPEC §7).
FACTORIAL_TABLE: dict[str, dict[str, str]] = {
    "valid": {"applicable": "KEEP", "adaptable": "ADAPT", "unusable": "REJECT"},
    "superseded": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "outranked": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "expired": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "unauthorized": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "draft": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
}


def expected_verdict(cell: str) -> str:
    """The paper's verdict for a cell written ``governance/applicability``."""
    governance, _, applicability = cell.partition("/")
    try:
        return FACTORIAL_TABLE[governance][applicability]
    except KeyError:
        raise ValueError(f"unknown factorial cell {cell!r}") from None


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
        return json.loads(self._canonical)  # a copy: the score stays frozen

    def to_json(self) -> str:
        return json.dumps(self.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load_responses(path: str | Path) -> tuple[ResponseLine, ...]:
    """Read and validate RESPONSES.jsonl: unknown fields, duplicate cases, a pair side twice: errors."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read responses: {exc}", source=source) from None
    return parse_responses(text.split("\n"), source=source)


def parse_responses(lines: Iterable[str], *, source: str | None = None) -> tuple[ResponseLine, ...]:
    result: list[ResponseLine] = []
    cases: set[str] = set()
    sides: set[tuple[str, str]] = set()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue

        def fail(cls: type[InputError], message: str, field: str | None) -> InputError:
            return cls(message, source=source, line=number, field=field)

        obj = decode_json(raw, source=source, line=number)
        if not isinstance(obj, dict):
            raise fail(InputError, "a response line must be a JSON object", None)
        check_keys(obj, ResponseLine, fail)
        try:
            item = converter.structure(obj, ResponseLine)
        except cattrs.BaseValidationError as exc:
            field, message = first_failure(exc)
            raise fail(InputError, message, field) from None
        if item.case in cases:
            raise fail(InputError, f"case {item.case!r} appears twice", "case")
        cases.add(item.case)
        if (item.pair is None) != (item.side is None):
            raise fail(InputError, "give both 'pair' and 'side', or neither", "side")
        if item.pair is not None and item.side is not None:
            if (item.pair, item.side) in sides:
                raise fail(InputError, f"pair {item.pair!r} has its {item.side} side twice", "side")
            sides.add((item.pair, item.side))
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
        result.append(item)
    return tuple(result)


def score(
    responses: Sequence[ResponseLine] | str | Path,
    log: Sequence[Event] | str | Path,
    *,
    policy: Policy | None = None,
) -> Score:
    """Score one system's responses against reference resolutions of ``log``."""
    policy = policy or DEFAULT_POLICY
    if isinstance(responses, (str, Path)):
        responses = load_responses(responses)
    if isinstance(log, (str, Path)):
        from .sources import open_log

        events: Sequence[Event] = open_log(log, policy=policy).events
    else:
        events = log
    facts = LogFacts(events)
    cache: dict[str, Resolution] = {}
    per_response = []
    for line in responses:
        actor = _actor(line, policy)
        resolution = _reference(events, actor, line, policy, cache)
        stated = parse_stated(line.response, verdict=line.verdict, bindings=line.bindings)
        violations = check_response(
            resolution, facts, question=line.question, stated=stated,
            context=line.context, experience=line.experience,
        )
        per_response.append((line, resolution, stated, violations))
    return Score(_aggregate(per_response, facts))


def _actor(line: ResponseLine, policy: Policy) -> Actor:
    try:
        return parse_actor(line.actor, policy=policy, source=f"case {line.case}")
    except InputError as exc:
        raise InputError(exc.message, source=f"case {line.case}", field=f"actor.{exc.field}") from None


def _reference(
    events: Sequence[Event], actor: Actor, line: ResponseLine, policy: Policy, cache: dict[str, Resolution]
) -> Resolution:
    from .canonical import parse_ts

    try:
        at = parse_ts(line.at)
    except ValueError as exc:
        raise InputError(str(exc), source=f"case {line.case}", field="at") from None
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
    for line, resolution, stated, violations in rows:
        bypasses = [v for v in violations if v.kind == "bypass"]
        if bypasses:
            leaked += 1
            for code in sorted({c for v in bypasses for c in v.codes}):
                by_reason[code] += 1
        if _chance_to_leak(resolution, facts, line.question):
            conditional_n += 1
            conditional_k += bool(bypasses)
        unsupported += any(v.kind == "unsupported" for v in violations)
        for v in violations:
            findings.append({"response": line.case, **v.to_dict()})
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
        "findings": sorted(findings, key=lambda f: (f["response"], f["kind"], f["fact"] or "", f["experience"] or "")),
    }


def _chance_to_leak(resolution: Resolution, facts: LogFacts, question: str) -> bool:
    """Whether the reference excluded a fact with a token not exempted by question or admitted facts."""
    from .tokens import extract

    exempt = extract(question, sources=True) + tuple(
        t for a in resolution.admitted for t in facts.tokens(a.fact)
    )
    return any(
        not find(token, exempt) for x in resolution.excluded for token in facts.tokens(x.fact)
    )


def _pairs(rows: list[tuple[Any, Resolution, Stated, Any]]) -> dict[str, Any]:
    sides: dict[str, dict[str, bool]] = defaultdict(dict)
    meta: dict[str, tuple[str, str | None]] = {}
    for line, _, stated, _ in rows:
        if line.pair is None:
            continue
        correct = line.pool is not None and grade(stated.text, Pool.from_json(line.pool)) == "gold"
        sides[line.pair][line.side] = correct
        meta.setdefault(line.pair, (line.axis or "unknown", line.decidable_by))
    by_axis: dict[str, dict[str, Any]] = {}
    for pair in sorted(sides):
        axis, decidable = meta[pair]
        entry = by_axis.setdefault(axis, {"decidable_by": decidable, "pairs": 0, "incomplete": 0,
                                          "both": 0, "pos": 0, "cf": 0})
        if entry["decidable_by"] is None:
            entry["decidable_by"] = decidable
        got = sides[pair]
        if len(got) < 2:
            entry["incomplete"] += 1
            continue
        entry["pairs"] += 1
        entry["both"] += got["positive"] and got["counterfactual"]
        entry["pos"] += got["positive"]
        entry["cf"] += got["counterfactual"]
    result = {}
    for axis, e in sorted(by_axis.items()):
        positive, counterfactual = Rate(e["pos"], e["pairs"]), Rate(e["cf"], e["pairs"])
        delta = (
            positive.rate - counterfactual.rate
            if positive.rate is not None and counterfactual.rate is not None
            else None
        )
        result[axis] = {
            "decidable_by": e["decidable_by"],
            "pairs": e["pairs"],
            "incomplete": e["incomplete"],
            "pair_accuracy": Rate(e["both"], e["pairs"]).to_dict(),
            "positive": positive.to_dict(),
            "counterfactual": counterfactual.to_dict(),
            "delta": delta,
        }
    return result


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
    from .tokens import extract

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
