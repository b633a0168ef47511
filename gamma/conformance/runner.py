"""The conformance runner: every case through one system, judged, then the metrics.

A *system* is the reference resolver Γ (the default), a built-in reader
(``gamma.conformance.readers``) or an external process speaking the protocol of
``gamma.conformance.external``. Each case gives a ``CaseResult`` (pass, fail, error or skip, with
every mismatch); the metrics are those of ``gamma score`` (DESIGN §8), computed by
scoring each answer with ``gamma.scoring.score`` against Γ's reference resolution of the
case's own log, plus trap accuracy by failure mode. SPEC.md §14 says
exactly when a case passes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

import attrs

from gamma.conformance.admissibility import AdmissibilityReport, audit_pairs
from gamma.conformance.cases import MODES, Case
from gamma.conformance.external import ExternalSystem, Reply
from gamma.conformance.model import Claimed
from gamma.conformance.readers import READERS, REFUSAL, value_text
from gamma.core.reading.convert import converter
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.decisions import Verdict
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Assert, Experience, Value, heard_by
from gamma.scoring.findings import Violation
from gamma.scoring.grading import Pool, mentions
from gamma.scoring.metrics import (
    Rate,
    ResponseLine,
    factorial,
    gbr,
    judge_lines,
    pair_table,
    pool_counts,
)

__all__ = ["CASE_STATUSES", "FAILING_FINDINGS", "CaseResult", "Report", "Said", "external_said",
           "judge_case", "metrics", "quote", "reader_said", "reference_said", "run"]

CASE_STATUSES: tuple[str, ...] = ("pass", "fail", "error", "skip")
#: Findings that fail an external system's case (``unsupported`` is reported, not failed:
#: a closed pool already fails an invented answer).
FAILING_FINDINGS: tuple[str, ...] = ("bypass", "ghost_binding", "verdict_mismatch")


@attrs.frozen(kw_only=True)
class Said:
    """What a system said about one case, before judging.

    ``response`` is agent-level text; ``derived`` marks an answer the runner read off the
    system's state (the probe keys' admitted values), which needs probe keys to be graded.
    ``mismatches`` is the resolver-level comparison with ``expect`` (None: not answered).
    """

    response: str | None = None
    derived: bool = True
    context: str | None = None
    verdict: str | None = None
    bindings: Mapping[str, str] | None = None
    mismatches: tuple[str, ...] | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class CaseResult:
    """One case's outcome: its status, every problem, and what was scored."""

    id: str
    suite: str
    status: str
    where: str = ""
    problems: tuple[str, ...] = ()
    answer: str | None = None
    grade: str | None = None
    verdict: str | None = None
    expected_verdict: str | None = None
    leaked: bool = False
    chance_to_leak: bool = False
    leak_codes: tuple[str, ...] = ()
    unsupported: bool = False
    carryover: bool = False
    findings: tuple[Violation, ...] = ()
    pair: str | None = None
    side: str | None = None
    axis: str | None = None
    decidable_by: str | None = None
    cell: str | None = None
    mode: str | None = None
    in_signature: bool | None = None
    #: how long the case took, and what an external system wrote on stderr meanwhile (the
    #: last 64 KiB): for the JUnit report only, never in ``to_json`` (which is deterministic)
    seconds: float = attrs.field(default=0.0, eq=False)
    stderr: str = attrs.field(default="", eq=False)

    @property
    def scored(self) -> bool:
        return self.answer is not None

    def to_dict(self) -> dict[str, Any]:
        body = attrs.asdict(self, recurse=False)
        del body["seconds"], body["stderr"]
        body["problems"] = list(self.problems)
        body["leak_codes"] = list(self.leak_codes)
        body["findings"] = [v.to_dict() for v in self.findings]
        return body


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class Report:
    """A whole run: which system, each case's result, the metrics and the optional audit."""

    kind: str
    name: str
    results: tuple[CaseResult, ...]
    metrics: Mapping[str, Any] = attrs.field(converter=_frozen, hash=False)
    audit: AdmissibilityReport | None = None

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def ok(self) -> bool:
        """Everything expected holds: no case failed or errored, no pair was rejected."""
        bad = self.count("fail") + self.count("error")
        return not bad and (self.audit is None or self.audit.ok)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def summary(self) -> dict[str, int]:
        return {"cases": len(self.results), **{_PLURAL[s]: self.count(s) for s in CASE_STATUSES}}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "system": {"kind": self.kind, "name": self.name},
            "ok": self.ok,
            "summary": self.summary(),
            "cases": [r.to_dict() for r in self.results],
            "metrics": json.loads(json.dumps(dict(self.metrics))),
        }
        if self.audit is not None:
            body["audit"] = self.audit.to_dict()
        return body


_PLURAL = {"pass": "passed", "fail": "failed", "error": "errors", "skip": "skipped"}

# -- the systems -----------------------------------------------------------------------------


def _case_experience(case: Case) -> str | None:
    """The experience a case's verdict is about: its one expected experience."""
    return next(iter(case.expect.experiences)) if len(case.expect.experiences) == 1 else None


def _replied(case: Case, admitted: Iterable[str], values: Mapping[str, Value]) -> dict[str, Value]:
    """A resolver-level reply's admitted facts with their values: the reply's ``values`` where
    it gives one (a recomputed value), else the stated value."""
    facts = {
        e.fact: e.value for e in case.events() if isinstance(e, Assert) and e.value is not None
    }
    return {fact: values.get(fact, facts[fact]) for fact in admitted if fact in facts}


def _answer_from(case: Case, admitted: Mapping[str, Value]) -> str:
    """The probe keys' admitted values (fact id to value), joined as the readers join them.

    Γ's values come from its records, so a value it recomputed from a stated derivation is
    the answer, never the stated one (issue 29)."""
    keys = {e.fact: e.key for e in case.events() if isinstance(e, Assert)}
    per_key = []
    for key in case.probe:
        values: list[str] = []
        for fact in sorted(admitted):
            if keys.get(fact) == key:
                text = value_text(admitted[fact])
                values += [] if text in values else [text]
        per_key.append("; ".join(values) if values else REFUSAL)
    return REFUSAL if all(a == REFUSAL for a in per_key) else "; ".join(per_key)


def _lines(case: Case, facts: Iterable[str] | None, values: Mapping[str, Value] | None = None) -> str:
    """``key = value`` lines of the given facts (all facts heard by ``at`` when None), a value
    in ``values`` replacing the stated one."""
    out = []
    wanted = None if facts is None else set(facts)
    given = values or {}
    for event in heard_by(case.events(), case.at):
        if isinstance(event, Assert) and (wanted is None or event.fact in wanted):
            value = given.get(event.fact, event.value)
            out.append(f"{event.key} = {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(out)


def reference_said(case: Case) -> Said:
    """Γ's resolution: its expectations, the probe keys' admitted values and its verdict."""
    resolution = case.resolve()
    experience = _case_experience(case) if case.cell else None
    outcome = next((x for x in resolution.experiences if x.experience == experience), None)
    return Said(  # the reference reader's answer, from this one resolution
        response=_answer_from(
            case, {a.fact: a.value for a in resolution.admitted if not a.needs_recheck}
        ),
        verdict=outcome.verdict if outcome else None,
        bindings=dict(outcome.bindings) if outcome and outcome.bindings else None,
        mismatches=case.expect.mismatches(Claimed.of(resolution)),
    )


def reader_said(name: str) -> Callable[[Case], Said]:
    """A built-in reader: its answer, shown every value heard; a verdict read off the answer.

    Readers answer values, not verdicts. On a factorial case the runner reads the reader's
    view of the used fact off its answer: a refusal withdraws it (REJECT), another value
    substitutes it (ADAPT), its own value keeps it valid (the recorded applicability).
    """
    reader = READERS[name]

    def said(case: Case) -> Said:
        answer = reader(case)
        verdict = _read_verdict(case, answer) if case.cell else None
        context = None if name == "reference" else _lines(case, None)
        return Said(response=answer, verdict=verdict, context=context)

    return said


def _read_verdict(case: Case, answer: str) -> str | None:
    experience = _case_experience(case)
    found = [e for e in case.events() if isinstance(e, Experience) and e.experience == experience]
    if not found:
        return None
    if answer == REFUSAL:
        return "REJECT"
    values = {
        e.fact: value_text(e.value)
        for e in case.events()
        if isinstance(e, Assert) and e.value is not None
    }
    used = tuple(v for f in found[0].uses or () if (v := values.get(f, "")).strip())
    if used and not any(cat == "gold" for cat, _ in mentions(answer, Pool(gold=used))):
        return "ADAPT"
    return {"applicable": "KEEP", "adaptable": "ADAPT"}.get(found[0].applicability or "applicable",
                                                            "REJECT")


def external_said(case: Case, system: ExternalSystem) -> Said:
    """Ask the external system; compare a resolver-level reply with the expectations."""
    exchange = system.ask(case)
    if exchange.reply is None:
        return Said(error=f"system: {exchange.error}")
    reply = exchange.reply
    if reply.error is not None:
        return Said(error=f"the system declined the case: {reply.error}")
    mismatches = None if reply.admitted is None else _compare_reply(case, reply)
    if reply.response is not None:
        return Said(response=reply.response, derived=False, context=reply.context,
                    verdict=reply.verdict, bindings=reply.bindings, mismatches=mismatches)
    assert reply.admitted is not None
    experience = _case_experience(case)
    answered = set(reply.admitted) - set(reply.needs_recheck)  # a fact to recheck is no answer
    return Said(response=_answer_from(case, _replied(case, answered, reply.values)),
                context=_lines(case, reply.admitted, reply.values),
                verdict=reply.verdict or reply.experiences.get(experience or ""),
                mismatches=mismatches)


def _compare_reply(case: Case, reply: Reply) -> tuple[str, ...]:
    """A resolver-level reply against ``expect``, as Γ's own resolution is compared."""
    assert reply.admitted is not None
    known = {e.fact for e in case.events() if isinstance(e, Assert)}
    problems = [f"claims: {f} is not a fact of the log"
                for f in sorted(set(reply.admitted) | set(reply.excluded)) if f not in known]
    problems += [f"claims: {f} is both admitted and excluded"
                 for f in sorted(set(reply.admitted) & set(reply.excluded))]
    problems += [f"claims: {f} needs recheck but is not admitted"
                 for f in sorted(set(reply.needs_recheck) - set(reply.admitted))]
    claimed = Claimed(
        admitted=frozenset(reply.admitted),
        excluded={f: frozenset(c) for f, c in reply.excluded.items()},
        experiences=dict(reply.experiences),
        ignored={e: frozenset({c}) for e, c in reply.ignored.items()},
    )
    return tuple(problems) + case.expect.mismatches(claimed)


# -- judging ---------------------------------------------------------------------------------


def judge_case(case: Case, said: Said, *, kind: str, reader: str | None = None) -> CaseResult:
    """A case's result from what the system said (SPEC.md §14.3)."""
    labels = {name: getattr(case, name) for name in ("pair", "side", "axis", "decidable_by",
                                                     "cell", "mode")}
    if reader is not None and case.signature is not None:
        labels["in_signature"] = reader in case.signature
    base = {"id": case.id, "suite": case.suite, "where": case.where(),
            "expected_verdict": _expected_verdict(case), **labels}
    if said.error is not None:
        return CaseResult(status="error", problems=(said.error,), **base)
    problems = list(said.mismatches or ())
    decided = said.mismatches is not None
    graded = case.pool is not None and (bool(case.probe) or not said.derived)
    found = _score(case, said, graded) if said.response is not None else {}
    result = CaseResult(status="pass", **base, **found)
    if graded and case.suite != "imported":  # an imported pool is prose ground truth: shown only
        decided = True
        if result.grade != "gold":
            assert case.pool is not None
            gold = json.dumps(list(case.pool.gold), ensure_ascii=False)
            problems.append(f"answer {quote(result.answer)} grades {result.grade}, expected gold {gold}")
    if kind == "external" and said.response is not None:
        decided = True
        failing = FAILING_FINDINGS if not said.derived else ("bypass",)
        problems += [_finding(v) for v in result.findings if v.kind in failing]
    status = "fail" if problems else "pass" if decided else "skip"
    return attrs.evolve(result, status=status, problems=tuple(problems))


def _finding(v: Violation) -> str:
    target = v.fact or v.experience
    tokens = ", ".join(json.dumps(t, ensure_ascii=False) for t in v.tokens)
    return f"{v.kind}{' ' + target if target else ''}: {v.detail}" + (f" ({tokens})" if tokens else "")


def _expected_verdict(case: Case) -> str | None:
    """A factorial case's expected verdict: its cell's (SPEC §7), else its one experience's."""
    if case.cell is None:
        return None
    return case.verdict or case.expect.experiences.get(_case_experience(case) or "")


def quote(text: str | None) -> str:
    """An answer for a message: JSON-quoted (so control characters show), cut at 200."""
    return json.dumps(text if text is None or len(text) <= 200 else text[:200] + "...",
                      ensure_ascii=False)


def _score(case: Case, said: Said, graded: bool) -> dict[str, Any]:
    """The judge-free metrics of one answer, judged as ``gamma score`` judges a line."""
    assert said.response is not None
    experience = _case_experience(case)
    expected = _expected_verdict(case)
    line = ResponseLine(
        case=case.id, actor=converter.unstructure(case.actor), at=format_ts(case.at),
        question=case.question, response=said.response, context=said.context,
        verdict=cast(Verdict | None, said.verdict), expected=cast(Verdict | None, expected),
        bindings=dict(said.bindings) if said.bindings else None,
        experience=experience if _checks_verdict(case, experience, expected, said) else None,
        pool=case.pool.to_dict() if graded and case.pool is not None else None,
    )
    judged = judge_lines([line], case.events(), policy=case.get_policy())[0]
    return {
        "answer": said.response,
        "grade": judged.grade,
        "verdict": judged.verdict,
        "leaked": judged.leaked,
        "chance_to_leak": judged.chance_to_leak,
        "leak_codes": judged.leak_codes,
        "unsupported": judged.unsupported,
        "carryover": judged.carryover,
        "findings": judged.findings,
    }


def _checks_verdict(case: Case, experience: str | None, expected: str | None, said: Said) -> bool:
    """A verdict is checked against Γ's for the case's experience, when the actor has it."""
    return experience is not None and (expected is not None or said.verdict is not None) and any(
        isinstance(e, Experience) and e.experience == experience
        and e.tenant == case.actor.tenant and e.ts <= case.at for e in case.events()
    )


# -- running ---------------------------------------------------------------------------------


def run(
    cases: Sequence[Case],
    *,
    reader: str | None = None,
    system: str | Sequence[str] | None = None,
    timeout: float = 10.0,
    audit: bool = False,
    cwd: str | None = None,
) -> Report:
    """Run ``cases`` through Γ (default), the built-in ``reader``, or the external ``system``."""
    if reader is not None and system is not None:
        raise InputError("give a reader or a system, not both", field="reader")
    if reader is not None and reader not in READERS:
        raise InputError(f"unknown reader {reader!r} (known: {', '.join(READERS)})", field="reader")
    results: list[CaseResult] = []
    if system is not None:
        with ExternalSystem(system, timeout=timeout, cwd=cwd) as process:
            for case in cases:
                mark, started = process.stderr.written, time.perf_counter()
                result = judge_case(case, external_said(case, process), kind="external")
                results.append(attrs.evolve(result, seconds=time.perf_counter() - started,
                                            stderr=process.stderr.since(mark)))
        kind, name = "external", process.command
    elif reader is not None:
        ask = reader_said(reader)
        results = [_timed(case, lambda c: judge_case(c, ask(c), kind="reader", reader=reader))
                   for case in cases]
        kind, name = "reader", reader
    else:
        results = [_timed(case, lambda c: judge_case(c, reference_said(c), kind="reference"))
                   for case in cases]
        kind, name = "reference", "Γ (gamma.resolve)"
    return Report(kind=kind, name=name, results=tuple(results), metrics=metrics(results),
                  audit=audit_pairs(cases) if audit else None)


def _timed(case: Case, work: Callable[[Case], CaseResult]) -> CaseResult:
    """``work(case)`` with the seconds it took (for the JUnit report's ``time``)."""
    started = time.perf_counter()
    result = work(case)
    return attrs.evolve(result, seconds=time.perf_counter() - started)


# -- metrics ---------------------------------------------------------------------------------


def metrics(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The §8 metrics over the results, in ``gamma score``'s shape, plus traps and suites.

    An errored case counts as a wrong answer wherever cases are counted (pairs, factorial,
    traps) and is left out of what describes responses (GBR, URR, pool).
    """
    said = [r for r in results if r.scored]
    suites: dict[str, dict[str, int]] = {}
    for r in results:
        counts = suites.setdefault(r.suite, {"cases": 0, **{_PLURAL[s]: 0 for s in CASE_STATUSES}})
        counts["cases"] += 1
        counts[_PLURAL[r.status]] += 1
    traps = {mode: Rate(sum(r.grade == "gold" for r in rs), len(rs)).to_dict()
             for mode in MODES if (rs := [r for r in results if r.mode == mode and r.suite == "trap"])}
    signed = [r for r in results if r.in_signature is not None]
    body = {
        "responses": len(said),
        "gbr": gbr((r.leaked, r.chance_to_leak, r.leak_codes) for r in said),
        "urr": Rate(sum(r.unsupported for r in said), len(said)).to_dict(),
        "pairs": pair_table(
            (r.pair, r.side, r.axis, r.decidable_by, r.grade == "gold")
            for r in results
            if r.pair is not None and r.side is not None
        ),
        "factorial": factorial(
            (r.expected_verdict, r.verdict, r.carryover)
            for r in results
            if r.expected_verdict is not None
        ),
        "pool": pool_counts(r.grade for r in said if r.grade is not None),
        "traps": traps,
        "suites": dict(sorted(suites.items())),
    }
    if signed:  # a reader run: does failing a trap match being in its recorded signature?
        agree = sum((r.grade != "gold") == r.in_signature for r in signed)
        body["signature"] = Rate(agree, len(signed)).to_dict()
    return body
