"""Derived values recomputed, never quoted (issue 29): Γ under the ``recompute`` policy.

The paper's example end to end, chains, failures, hidden inputs, the door, the engine, and
properties over generated derivation DAGs checked against an evaluation written here with
``fractions.Fraction`` from the language's stated rules (SPEC "Derived values recomputed").
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import reference
from helpers import AT, A, R, X, jsonl, log, stamp, ts
from hypothesis import given
from hypothesis import strategies as st

import gamma
from gamma.core.incremental import derived as derived_module
from gamma.core.incremental.engine import EngineState
from gamma.core.reading.events import event_from_json, parse_events
from gamma.core.reading.fastpath import fast_line
from gamma.core.reading.plain import plain_line
from gamma.core.terms.decisions import Recomputed
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Assert, heard_by
from gamma.data import policy_by_name
from gamma.storage.store import Store

ROOT = Path(__file__).resolve().parent.parent
RECOMPUTE = policy_by_name("recompute")
DEFAULT = policy_by_name("default")
WHO = {"id": "alice", "tenant": "acme"}


def derived(fact: str, key: str, value: Any, derivation: str, *deps: str, **kw: Any) -> dict[str, Any]:
    return A(fact, key, value, kind="derived", depends_on=list(deps), derivation=derivation, **kw)


def records(res: gamma.Resolution) -> dict[str, Any]:
    return {**{a.fact: a for a in res.admitted}, **{x.fact: x for x in res.excluded}}


PAPER = (
    A("W1", "snacks.weekly", 10),
    derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} * 2", "W1"),
    A("W2", "snacks.weekly", 7),
)


# -- the paper's example, chains, failures ------------------------------------------------


def test_the_paper_example_recomputes_14_and_withholds_the_stated_20() -> None:
    res = gamma.resolve(log(*PAPER), WHO, AT, RECOMPUTE)
    two_weeks = records(res)["T1"]
    assert isinstance(two_weeks, Recomputed)
    assert two_weeks.value == 14
    assert two_weeks.inputs.facts == ("W2",) and two_weeks.inputs.events == ("e3",)
    assert two_weeks.stale is not None and (two_weeks.stale.code, two_weeks.stale.value) == ("recomputed", 20)
    body = json.loads(res.to_json())
    entry = next(a for a in body["admitted"] if a["fact"] == "T1")
    assert entry["stale"] == {"code": "recomputed", "value": 20}
    assert entry["inputs"] == {"events": ["e3"], "facts": ["W2"]}
    context = res.render("context")
    assert "- [T1] snacks.two_weeks = 14 (recomputed from W2)" in context
    assert "= 20" not in context and " 20" not in context.split("\n", 1)[1]
    assert gamma.Resolution.from_dict(body).digest == res.digest  # the optional fields read back


def test_before_the_change_the_stated_value_is_admitted_with_its_inputs_and_no_stale() -> None:
    res = gamma.resolve(log(*PAPER[:2]), WHO, AT, RECOMPUTE)
    entry = next(a for a in json.loads(res.to_json())["admitted"] if a["fact"] == "T1")
    assert entry["value"] == 20 and "stale" not in entry
    assert entry["inputs"] == {"events": ["e1"], "facts": ["W1"]}


def test_under_the_current_policies_a_derivation_changes_nothing_but_the_log_heads() -> None:
    plain = [dict(e) for e in PAPER]
    del plain[1]["derivation"]
    for name in ("default", "recheck", "strict", "multivalue"):
        policy = policy_by_name(name)
        with_it = json.loads(gamma.resolve(log(*PAPER, policy=policy), WHO, AT, policy).to_json())
        without = json.loads(gamma.resolve(log(*plain, policy=policy), WHO, AT, policy).to_json())
        for body in (with_it, without):
            for field in ("digest", "log", "tree"):
                del body[field]
        assert with_it == without, name
    default = records(gamma.resolve(log(*PAPER), WHO, AT, DEFAULT))["T1"]
    assert default.codes == ("dependency_invalidated",)  # type: ignore[union-attr]


def test_the_cli_answers_14_for_the_example_log() -> None:
    args = ["resolve", str(ROOT / "examples/derived.jsonl"), "--actor", str(ROOT / "examples/sam.json"),
            "--at", "2026-03-06T00:00:00Z", "--policy", "recompute"]  # fmt: skip
    def gamma_cli(*more: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "gamma", *args, *more], capture_output=True, text=True, check=True
        ).stdout

    admitted = {a["fact"]: a for a in json.loads(gamma_cli("--format", "json"))["admitted"]}
    assert admitted["T1"]["value"] == 14 and admitted["T1"]["stale"]["value"] == 20
    # the two-link chain, in order: pay 3500 -> savings 30% = 1050 -> fund 6 x savings = 6300
    assert (admitted["S1"]["value"], admitted["G1"]["value"]) == (1050, 6300)
    assert admitted["G1"]["inputs"]["facts"] == ["S1"]
    context = gamma_cli("--format", "context")
    assert "- [T1] snacks.two_weeks = 14 (recomputed from W2)" in context


def test_a_chain_recomputes_in_dependency_order() -> None:
    events = log(
        A("P1", "pay", 3000),
        derived("S1", "savings", 900, "{pay} * 30%", "P1"),
        derived("G1", "fund", "9000", "{savings} * 10", "S1"),
        A("P2", "pay", "3500.50"),
    )
    got = records(gamma.resolve(events, WHO, AT, RECOMPUTE))
    assert got["S1"].value == "1050.15"  # type: ignore[union-attr]
    assert got["G1"].value == "10501.5"  # type: ignore[union-attr]


def test_an_input_restated_later_by_a_derived_fact_is_read_once_it_is_decided() -> None:
    """The trap corpus's two-link chain with the middle link restated after its reader: the
    fund reads the savings' current holder S2, decided before it (dependency order)."""
    chain = (
        A("P1", "pay", 3000),
        derived("S1", "savings", 900, "{pay} * 30%", "P1"),
        derived("G1", "fund", 5400, "{savings} * 6", "S1"),
        A("P2", "pay", 3500),
        derived("S2", "savings", 1050, "{pay} * 30%", "P2"),
    )
    events, lines = log(*chain), stamp(list(chain))
    res = gamma.resolve(events, WHO, AT, RECOMPUTE)
    got = records(res)
    assert got["G1"].value == 6300 and got["G1"].inputs.facts == ("S2",)  # type: ignore[union-attr]
    assert got["G1"].stale.value == 5400  # type: ignore[union-attr]
    assert [r.code for r in got["S1"].reasons] == ["dependency_invalidated", "superseded"]
    expected, _ = reference.resolve(lines, WHO, res.at, RECOMPUTE)
    assert res.to_dict() == expected
    engine = EngineState(RECOMPUTE)
    for line in lines:  # one event at a time: the engine reorders only what a change touches
        engine.append([line])
    assert engine.resolve(WHO, AT).to_json() == res.to_json()


def test_derived_facts_that_read_each_other_keep_todays_rule() -> None:
    """A cycle through a restatement: S2 restates S1's key and reads G1, which reads S1's
    holder S2. Neither reads the other: both keep phase 4's codes (fail closed)."""
    cycle = (
        A("P1", "pay", 3000),
        derived("S1", "savings", 900, "{pay} * 30%", "P1"),
        derived("G1", "fund", 5400, "{savings} * 6", "S1"),
        derived("S2", "savings", 1000, "{fund} / 6", "G1"),
        A("P2", "pay", 3500),
    )
    events, lines = log(*cycle), stamp(list(cycle))
    res = gamma.resolve(events, WHO, AT, RECOMPUTE)
    got = records(res)
    assert isinstance(got["G1"], gamma.Excluded) and isinstance(got["S2"], gamma.Excluded)
    assert [r.code for r in got["G1"].reasons] == ["dependency_invalidated"]
    expected, _ = reference.resolve(lines, WHO, res.at, RECOMPUTE)
    assert res.to_dict() == expected
    engine = EngineState(RECOMPUTE)
    for line in lines:
        engine.append([line])
    assert engine.resolve(WHO, AT).to_json() == res.to_json()


def test_an_experience_that_used_the_stale_stated_value_adapts() -> None:
    """The action taken on "20" was taken on a value Γ no longer gives: ADAPT, naming the
    inputs' events; before the change it stands (KEEP)."""
    used = X("x1", ["T1"], content="bought 20 packs")
    lines = stamp([PAPER[0], PAPER[1], used, PAPER[2]])
    engine = EngineState(RECOMPUTE)
    for cut in (3, 4):
        events = parse_events([json.dumps(line) for line in lines[:cut]], policy=RECOMPUTE)
        res = gamma.resolve(events, WHO, AT, RECOMPUTE)
        (verdict,) = res.experiences
        engine.append(lines[len(engine):cut])
        assert engine.resolve(WHO, AT).to_json() == res.to_json()
        expected, _ = reference.resolve(lines[:cut], WHO, res.at, RECOMPUTE)
        assert res.to_dict() == expected
        if cut == 3:
            assert verdict.verdict == "KEEP" and verdict.reasons == ()
        else:
            assert verdict.verdict == "ADAPT"
            assert [(r.fact, r.code, r.events) for r in verdict.reasons] == [("T1", "recomputed", ("e4",))]


def test_explain_names_the_failed_evaluation_and_a_verified_change() -> None:
    events = log(
        A("W1", "snacks.weekly", 10),
        derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} / ({snacks.weekly} - 7)", "W1"),
        A("W2", "snacks.weekly", 7),
    )
    x = gamma.explain(events, "T1", WHO, AT, policy=RECOMPUTE)
    assert x.codes == ("derivation_failed",)
    assert x.to_dict()["failure"] == {"code": "division_by_zero", "column": 17, "detail": "column 17: division by zero"}
    assert [c.changes for c in x.changes] == [({"kind": "without_event", "event": "e3"},)]
    assert "its evaluation failed (division_by_zero) at" in x.render()
    assert "if event e3 were not in the log" in x.render()
    admitted = gamma.explain(events[:2], "T1", WHO, AT, policy=RECOMPUTE)
    assert "failure" not in admitted.to_dict()  # only for a failed evaluation


@pytest.mark.parametrize(
    ("value", "derivation", "detail"),
    [(0, "{snacks.weekly} / 0 + 1", "division by zero"),
     ("seven", "{snacks.weekly} * 2", "type mismatch"),
     ("9" * 39, "{snacks.weekly} * 20", "out of range")],
)  # fmt: skip
def test_a_failed_evaluation_excludes_the_fact_and_invalidates_its_dependents(
    value: Any, derivation: str, detail: str
) -> None:
    events = log(
        A("W1", "snacks.weekly", 10),
        derived("T1", "snacks.two_weeks", 20, derivation, "W1"),
        A("W2", "snacks.weekly", value),
        A("N1", "note", "buy", kind="derived", depends_on=["T1"]),
    )
    got = records(gamma.resolve(events, WHO, AT, RECOMPUTE))
    failed = got["T1"]
    assert failed.reasons == (gamma.Reason("derivation_failed", ("e3",), ("W2",)),), detail  # type: ignore[union-attr]
    assert got["N1"].reasons == (  # type: ignore[union-attr]
        gamma.Reason("dependency_invalidated", ("e3",), ("T1",)),
    )


def test_a_hidden_input_stays_dependency_restricted_and_is_never_read() -> None:
    events = log(
        A("W1", "snacks.weekly", 10),
        derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} * 2", "W1"),
        A("W2", "snacks.weekly", 7, visibility={"roles": ["finance"]}),
    )
    res = gamma.resolve(events, WHO, AT, RECOMPUTE)  # the current input is hidden: not read
    assert records(res)["T1"].codes == ("dependency_invalidated",)  # type: ignore[union-attr]
    assert '"value":14' not in res.to_json()
    hidden_first = log(
        A("W1", "snacks.weekly", 10, visibility={"roles": ["finance"]}),
        derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} * 2", "W1"),
    )
    res = gamma.resolve(hidden_first, WHO, AT, RECOMPUTE)
    assert records(res)["T1"].codes == ("dependency_restricted",)  # type: ignore[union-attr]
    assert res.admitted == () and '"value":' not in res.to_json()


@pytest.mark.parametrize(
    "events",
    [(A("W1", "snacks.weekly", 10), derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} * 2", "W1"),
      R("W1")),
     (A("W1", "snacks.weekly", 10, valid_until=ts(2.5)),
      derived("T1", "snacks.two_weeks", 20, "{snacks.weekly} * 2", "W1"))],
    ids=["retracted", "expired"],
)  # fmt: skip
def test_an_input_retracted_or_expired_without_replacement_keeps_todays_rule(
    events: tuple[dict[str, Any], ...],
) -> None:
    codes = records(gamma.resolve(log(*events), WHO, AT, RECOMPUTE))["T1"].codes  # type: ignore[union-attr]
    assert codes == ("dependency_invalidated",)


# -- the door ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "needle"),
    [(A("D", "d", 1, derivation="{W} * 2", depends_on=["W"]), "only allowed"),
     (derived("D", "d", 1, "{W} * ", "W"), "column"),
     (derived("D", "d", 1, "{nope} * 2", "W"), "names no fact"),
     (derived("D", "d", 1, "{W} * 2"), "depends_on"),
     (A("D", "d", 1, kind="derived", depends_on=["W"], derivation=7), "string")],
)  # fmt: skip
def test_a_bad_derivation_is_an_input_error_naming_its_field(event: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError) as caught:
        log(A("W", "w", 1), event)
    assert caught.value.field == "derivation" and caught.value.line == 2
    assert needle in str(caught.value)


def test_a_key_named_by_two_dependencies_is_refused() -> None:
    with pytest.raises(InputError, match="2 facts") as caught:
        log(A("W1", "w", 1), A("W2", "w", 2, scope="x"), derived("D", "d", 1, "{w} * 2", "W1", "W2"))
    assert caught.value.field == "derivation"


@given(st.sampled_from(("{W} * 2", "round({W} / 3, 2)", 'if({W} > 1, "a", "b")', "{W} *",
                        "{nope} + 1", "1 + 2", "")),
       st.sampled_from(("derived", "fact", None)), st.booleans())  # fmt: skip
def test_fast_and_strict_readers_agree_on_derivations(text: str, kind: str | None, deps: bool) -> None:
    """Every reader validates a derivation alike: the fast ones (plain, fastpath) accept a line
    only when the strict one does, and then build the same event."""
    body = {**A("D", "d", 2, **({"kind": kind} if kind else {}), **({"depends_on": ["W"]} if deps else {})),
            "derivation": text}  # fmt: skip
    line = json.dumps(stamp([A("W", "w", 1), body])[1], separators=(",", ":"))
    try:
        strict = event_from_json(json.loads(line))
    except InputError as error:
        assert error.field == "derivation"
        strict = None
    plain, fast = plain_line(line, DEFAULT), fast_line(line, DEFAULT)
    if strict is None:
        assert plain is None and fast is None
    else:
        assert fast is not None and fast[0] == strict
        if "\\" not in line:  # a plain line (no escape): the plain way takes it too
            assert plain is not None and plain[0] == strict
            assert plain[1] == fast[2]  # the same canonical bytes
        else:
            assert plain is None


# -- the engine --------------------------------------------------------------------------


def test_the_engine_recomputes_only_the_dependents_of_a_changed_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = derived_module.recomputed

    def counting(fact: Any, *args: Any, **kw: Any) -> Any:
        calls.append(fact.id)
        return real(fact, *args, **kw)

    monkeypatch.setattr(derived_module, "recomputed", counting)
    engine = EngineState(RECOMPUTE)
    lines = stamp([*PAPER[:2], A("P1", "pay", 3000), derived("S1", "savings", 900, "{pay} * 30%", "P1"),
                   A("U", "unrelated", 1), A("W2", "snacks.weekly", 7)])  # fmt: skip
    engine.append(lines[:5])
    engine.resolve(WHO, AT)
    calls.clear()
    engine.append(lines[5:])
    after = engine.resolve(WHO, AT)
    assert calls == ["T1"]  # not S1: its input did not change
    pure = gamma.resolve(parse_events([json.dumps(x) for x in lines]), WHO, AT, RECOMPUTE)
    assert after.to_json() == pure.to_json()
    calls.clear()
    engine.append(stamp([A("U2", "unrelated", 2)] * 7)[6:])
    engine.resolve(WHO, AT)
    assert calls == []


# -- properties --------------------------------------------------------------------------

_NUMERIC = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(%?)")
_Q = Fraction(1, 10**18)
_BOUND = 10**40
_TEMPLATES: dict[str, Callable[[Fraction, Fraction], Fraction | None]] = {
    "{a} + {b}": lambda a, b: a + b,
    "{a} - {b}": lambda a, b: a - b,
    "{a} * {b}": lambda a, b: _round(a * b),
    "{a} / {b}": lambda a, b: None if b == 0 else _round(a / b),
    "{a} * 30% + {b}": lambda a, b: _round(a * Fraction(3, 10)) + b,
    "min({a}, {b})": min,
    "max({a}, {b}, 2.5)": lambda a, b: max(a, b, Fraction(5, 2)),
}
_INPUTS = (0, 1, 7, 10, -3, 3000, 3500, "12.5", "0.001", "30%", "9" * 39, "x", True)


def _round(x: Fraction) -> Fraction:
    """Half-even to 18 places (the language's rule for ``*`` and ``/``)."""
    scaled = x / _Q
    floor = scaled.numerator // scaled.denominator
    rest = scaled - floor
    up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1)
    return (floor + up) * _Q


def _number(value: Any) -> Fraction | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    match = _NUMERIC.fullmatch(value)
    if match is None:
        return None
    sign, whole, fraction, percent = match.groups()
    if len(whole) + len(fraction or "") > 40:  # SPEC §19.7: a written number has at most 40
        return None  # digits, also one a derivation computed (40 whole digits and a fraction)
    number = Fraction(int(whole + (fraction or "")), 10 ** len(fraction or ""))
    return (-number if sign else number) / (100 if percent else 1)


def _expected(template: str, a: Any, b: Any) -> Any:
    """The independent evaluation: a fact value, or None for a failure."""
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return None
    result = _TEMPLATES[template](x, y)
    if result is None or abs(result) >= _BOUND:
        return None
    if result.denominator == 1 and abs(result) <= 2**53 - 1:
        return int(result)
    sign = "-" if result < 0 else ""
    whole, rest = divmod(abs(result.numerator), result.denominator)
    digits = str(rest * 10**18 // result.denominator).rjust(18, "0").rstrip("0")
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


@st.composite
def derivation_logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Inputs that change, expire, get retracted or hidden; derived facts over earlier
    facts (inputs or derived), so DAGs and chains form; keys restated supersede."""
    lines: list[dict[str, Any]] = []
    facts: list[str] = []
    for n in range(draw(st.integers(1, 10))):
        what = draw(st.sampled_from(("input", "input", "derived", "derived", "derived", "retract")))
        fact = f"F{n}"
        if what == "retract" and facts:
            lines.append(R(draw(st.sampled_from(facts))))
            continue
        if what == "derived" and facts:
            template = draw(st.sampled_from(sorted(_TEMPLATES)))
            a, b = draw(st.sampled_from(facts)), draw(st.sampled_from(facts))
            text = template.replace("{a}", "{" + a + "}").replace("{b}", "{" + b + "}")
            key = draw(st.sampled_from(("d0", f"d{n}", f"d{n}")))  # a chain or a restatement
            lines.append(derived(fact, key, draw(st.sampled_from((14, 20, "x"))), text, a, b))
        else:
            extra: dict[str, Any] = {}
            if draw(st.integers(0, 7)) == 0:
                extra["visibility"] = {"roles": ["finance"]}
            if draw(st.integers(0, 7)) == 0:
                extra["valid_until"] = ts(n + draw(st.integers(1, 4)))
            lines.append(A(fact, draw(st.sampled_from(("k0", "k1"))), draw(st.sampled_from(_INPUTS)), **extra))
        facts.append(fact)
    return stamp(lines)


def _no_float(obj: Any) -> None:
    assert not isinstance(obj, float)
    for item in obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ():
        _no_float(item)


@given(derivation_logs(), st.integers(0, 12))
def test_recomputed_values_equal_an_independent_evaluation_at_every_cut(
    lines: list[dict[str, Any]], late: int
) -> None:
    events = parse_events([json.dumps(line) for line in lines], policy=RECOMPUTE)
    by_id = {line["fact"]: line for line in lines if line["type"] == "assert"}
    for cut in range(1, len(lines) + 1):
        at = lines[cut - 1]["ts"] if late == 0 else ts(cut + late / 4)
        res = gamma.resolve(events, WHO, at, RECOMPUTE)
        body = json.loads(res.to_json())
        _no_float(body)
        ids = [a["fact"] for a in body["admitted"]] + [x["fact"] for x in body["excluded"]]
        heard = [e.fact for e in heard_by(events, res.at) if isinstance(e, Assert)]
        assert sorted(ids) == sorted(heard)  # a partition of the facts heard: each once
        admitted_by_key = {a["key"]: a["value"] for a in body["admitted"]}
        for entry in body["admitted"]:
            line = by_id[entry["fact"]]
            if "derivation" not in line:
                assert "inputs" not in entry
                continue
            assert "inputs" in entry  # admitted under recompute: always evaluated
            template = next(t for t in _TEMPLATES if _matches(t, line))
            a, b = line["depends_on"]
            want = _expected(template, admitted_by_key[by_id[a]["key"]], admitted_by_key[by_id[b]["key"]])
            assert want is not None and entry["value"] == want and type(entry["value"]) is type(want)
            stale = entry.get("stale")
            same = type(line["value"]) is type(want) and line["value"] == want
            assert (stale is None) == same and (same or stale == {"code": "recomputed", "value": line["value"]})
        for entry in body["excluded"]:
            failed = [r for r in entry["reasons"] if r["code"] == "derivation_failed"]
            if failed:
                line = by_id[entry["fact"]]
                values = {by_id[f]["key"]: admitted_by_key[by_id[f]["key"]] for f in failed[0]["facts"]}
                template = next(t for t in _TEMPLATES if _matches(t, line))
                a, b = line["depends_on"]
                assert _expected(template, values[by_id[a]["key"]], values[by_id[b]["key"]]) is None


def _matches(template: str, line: dict[str, Any]) -> bool:
    a, b = line["depends_on"]
    return template.replace("{a}", "{" + a + "}").replace("{b}", "{" + b + "}") == line["derivation"]


@given(derivation_logs(), st.integers(0, 12), st.sampled_from(("alice", "bob")))
def test_the_reference_and_the_engine_agree_with_the_resolver_on_derivations(
    lines: list[dict[str, Any]], late: int, who: str
) -> None:
    actor = {"id": who, "tenant": "acme", **({"roles": ["finance"]} if who == "bob" else {})}
    events = parse_events([json.dumps(line) for line in lines], policy=RECOMPUTE)
    engine = EngineState(RECOMPUTE)
    for cut in range(1, len(lines) + 1):
        engine.append(lines[cut - 1 : cut])
        at = ts(cut + late / 4)
        got = gamma.resolve(events[:cut], actor, at, RECOMPUTE)
        expected, _ = reference.resolve(lines[:cut], actor, got.at, RECOMPUTE)
        assert got.to_dict() == expected
        assert engine.resolve(actor, at).to_json() == got.to_json()


def test_a_resolution_with_derivations_is_the_same_bytes_in_another_process() -> None:
    script = (
        "import gamma, hashlib, sys\n"
        "from gamma.data import policy_by_name\n"
        "from gamma.core.reading.events import load_events\n"
        "events = load_events(sys.argv[1])\n"
        "res = gamma.resolve(events, {'id': 'sam', 'tenant': 'home'}, '2026-03-06T00:00:00Z',"
        " policy_by_name('recompute'))\n"
        "print(hashlib.sha256(res.to_json_bytes()).hexdigest(), res.digest)\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script, str(ROOT / "examples/derived.jsonl")],
            capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "4242")
    }  # fmt: skip
    assert len(outputs) == 1
    here = gamma.resolve(
        gamma.load_events(ROOT / "examples/derived.jsonl"), {"id": "sam", "tenant": "home"},
        "2026-03-06T00:00:00Z", RECOMPUTE,
    )  # fmt: skip
    assert outputs.pop().split() == [hashlib.sha256(here.to_json_bytes()).hexdigest(), here.digest]


def test_jsonl_helper_keeps_the_derivation_field() -> None:
    assert '"derivation": "{snacks.weekly} * 2"' in jsonl(*PAPER)


def test_a_store_append_checks_inputs_against_the_keys_it_holds(tmp_path: Path) -> None:
    """A derivation whose input names no dependency, where the dependencies are only in the
    store, is refused at append (field derivation), never stored to break the store's reader;
    one naming a stored dependency's key is accepted and recomputed."""
    store = tmp_path / "s.db"
    with Store.init(store, policy=RECOMPUTE) as opened:
        opened.append((ROOT / "examples/derived.jsonl").read_text(encoding="utf-8").splitlines())
    bad = {"id": "x9", "type": "assert", "ts": "2026-03-07T00:00:00Z", "actor": "sam",
           "tenant": "home", "fact": "B1", "key": "bad", "value": 1, "kind": "derived",
           "depends_on": ["T1"], "derivation": "{nope} * 2"}
    with Store.open(store) as opened:
        with pytest.raises(gamma.InputError) as caught:
            opened.append([json.dumps(bad)])
        assert caught.value.field == "derivation"
        opened.append([json.dumps({**bad, "derivation": "{snacks.two_weeks} * 2"})])
    with Store.open(store, read_only=True) as opened:
        res = gamma.resolve(opened.events(), {"id": "sam", "tenant": "home"},
                            "2026-03-08T00:00:00Z", RECOMPUTE)
    assert {a.fact: a.value for a in res.admitted}["B1"] == 28


def test_a_derivation_of_constants_says_recomputed_without_an_empty_list() -> None:
    """No input: the context says "(recomputed)", never "(recomputed from )"."""
    events = log(derived("T1", "t", 20, "10 * 3"))
    res = gamma.resolve(events, WHO, AT, RECOMPUTE)
    assert "- [T1] t = 30 (recomputed)" in res.render("context").splitlines()
    assert "recomputed from ," not in res.render("text") and "from )" not in res.render("text")
