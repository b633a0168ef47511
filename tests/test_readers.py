"""The built-in readers: each behaves as documented, and together they check the corpus
(every trap is failed by a lazy reader and by exactly its signature, anti-traps by eager
invalidation only among the lazy ones, every pair by always-answer or always-refuse, and
nothing by the reference)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from gamma.conformance.cases import Case, load_cases, parse_case
from gamma.conformance.model import READER_NAMES
from gamma.conformance.readers import (
    LAZY_READERS,
    READERS,
    REFUSAL,
    answers,
    failing_readers,
    grade_answer,
    value_text,
)
from gamma.scoring.grading import grade

ROOT = Path(__file__).resolve().parent.parent
CASES = load_cases(ROOT / "fixtures")
TRAPS = [c for c in CASES if c.suite == "trap"]
ACTOR = {"id": "alice", "tenant": "acme", "roles": ["sales"], "scope": "helios/launch"}


def event(n: int, type_: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"e{n}", "type": type_, "ts": f"2026-03-01T09:{n:02d}:00Z", "actor": "w",
            "tenant": fields.pop("tenant", "acme"), **fields}


def fact(n: int, fid: str, key: str, value: Any, **fields: Any) -> dict[str, Any]:
    return event(n, "assert", fact=fid, key=key, value=value, **fields)


def mk(events: list[dict[str, Any]], probe: list[str] | str = "k", *, at: str = "2026-03-01T10:00:00Z",
       actor: dict[str, Any] | None = None, policy: str | None = None) -> Case:
    body: dict[str, Any] = {
        "id": "unit", "suite": "adversarial", "question": "?",
        "probe": [probe] if isinstance(probe, str) else probe, "actor": actor or ACTOR, "at": at,
        "events": events, "expect": {}, "pool": {"gold": ["x"]},
    }
    if policy is not None:
        body["policy"] = policy
    return parse_case(body, path=ROOT / "fixtures" / "unit.json")


def read(name: str, case: Case) -> str:
    return READERS[name](case)


class TestTheSet:
    def test_names(self) -> None:
        """Nine readers under their documented names; four of them are the lazy ones."""
        assert list(READERS) == ["reference", "latest-mention", "most-frequent", "no-recompute",
                                 "quote-stated", "eager-invalidation", "ungoverned", "always-refuse",
                                 "always-answer"]
        assert tuple(READERS) == READER_NAMES  # the names case files are checked against
        assert set(LAZY_READERS) < set(READERS)
        assert REFUSAL == "no current value"

    def test_deterministic_strings(self) -> None:
        """Every reader answers every case with a string, the same one twice."""
        for case in CASES[::5]:
            first = answers(case)
            assert first == answers(case)
            assert all(isinstance(a, str) and a for a in first.values())

    def test_value_text(self) -> None:
        """Values become text the way the pools spell them."""
        assert [value_text(v) for v in ("15%", 14, True, False)] == ["15%", "14", "true", "false"]


class TestLazyReaders:
    def test_latest_mention_ignores_governance(self) -> None:
        """The last assert wins, whatever its status, fate, tenant or visibility."""
        case = mk([fact(1, "F1", "k", "a"), fact(2, "F2", "k", "b", status="draft"),
                   event(3, "retract", fact="F2"), fact(4, "F3", "other", "z"),
                   fact(5, "F4", "k", "c", tenant="globex", visibility={"roles": ["x"]})])
        assert read("latest-mention", case) == "c"
        assert read("reference", case) == "a"

    def test_latest_mention_hears_nothing_after_t(self) -> None:
        """Events after the probe time are not heard by any reader."""
        case = mk([fact(1, "F1", "k", "a"), fact(30, "F2", "k", "b")], at="2026-03-01T09:10:00Z")
        assert read("latest-mention", case) == "a"
        assert read("latest-mention", mk([fact(1, "F1", "other", "a")])) == REFUSAL

    def test_most_frequent_counts_experience_uses(self) -> None:
        """Mentions are asserts of the key plus experience uses of its facts."""
        case = mk([fact(1, "F1", "k", "loud"), event(2, "experience", experience="X1", content=".", uses=["F1"]),
                   fact(3, "F2", "k", "quiet")])
        assert read("most-frequent", case) == "loud"

    def test_most_frequent_tie_goes_to_the_later(self) -> None:
        """On a tie the value mentioned last wins."""
        case = mk([fact(1, "F1", "k", "a"), fact(2, "F2", "k", "b")])
        assert read("most-frequent", case) == "b"

    def test_no_recompute_quotes_the_first_derivation(self) -> None:
        """A derived value survives its input's change, and a re-derivation is not heard."""
        events = [fact(1, "W1", "w", 10), fact(2, "D1", "d", 20, kind="derived", depends_on=["W1"]),
                  fact(3, "W2", "w", 7)]
        stale = mk(events, "d")
        assert read("reference", stale) == REFUSAL
        assert read("no-recompute", stale) == "20"
        restated = mk([*events, fact(4, "D2", "d", 14, kind="derived", depends_on=["W2"])], "d")
        assert read("reference", restated) == "14"
        assert read("no-recompute", restated) == "20"
        assert read("latest-mention", restated) == "14"

    def test_eager_invalidation_drops_anchored_values(self) -> None:
        """A later mention of an input, even a hypothetical one, makes it drop the value."""
        events = [fact(1, "W", "snacks.weekly", 9), fact(2, "D", "snacks.total", 18, depends_on=["W"])]
        assert read("eager-invalidation", mk(events, "snacks.total")) == "18"
        what_if = mk([*events, fact(3, "H", "snacks.weekly", 12, status="hypothetical")], "snacks.total")
        assert read("reference", what_if) == "18"
        assert read("eager-invalidation", what_if) == REFUSAL

    def test_eager_invalidation_relates_keys_by_prefix(self) -> None:
        """A key of the same entity counts as related; another entity's does not."""
        events = [fact(1, "A", "snacks.total", 18)]
        assert read("eager-invalidation", mk([*events, fact(2, "B", "snacks.brand", "KIND")], "snacks.total")) == REFUSAL
        assert read("eager-invalidation", mk([*events, fact(2, "B", "milk.type", "oat")], "snacks.total")) == "18"


class TestGovernedReaders:
    def test_ungoverned_ignores_visibility_and_tenants(self) -> None:
        """It sees restricted facts and other tenants' facts, but applies retraction and time."""
        hidden = mk([fact(1, "F1", "k", "secret", visibility={"roles": ["board"]})])
        assert (read("ungoverned", hidden), read("reference", hidden)) == ("secret", REFUSAL)
        foreign = mk([fact(1, "F1", "k", "a"), fact(2, "F2", "k", "b", tenant="globex")])
        assert (read("ungoverned", foreign), read("reference", foreign)) == ("b", "a")
        retracted = mk([fact(1, "F1", "k", "a"), event(2, "retract", fact="F1")])
        assert read("ungoverned", retracted) == REFUSAL
        expired = mk([fact(1, "F1", "k", "a", valid_until="2026-03-01T09:30:00Z")])
        assert read("ungoverned", expired) == REFUSAL

    def test_ungoverned_ignores_revokes(self) -> None:
        """Grants and revokes mean nothing to it."""
        case = mk([fact(1, "F1", "k", "a", visibility={"roles": ["x"]}),
                   event(2, "grant", fact="F1", role="sales"), event(3, "revoke", fact="F1", role="sales")])
        assert (read("ungoverned", case), read("reference", case)) == ("a", REFUSAL)

    def test_reference_does_not_quote_a_value_needing_recheck(self) -> None:
        """Under the recheck policy a stale derivation is admitted, flagged, and no answer."""
        case = mk([fact(1, "W1", "w", 10), fact(2, "D1", "d", 20, depends_on=["W1"]), fact(3, "W2", "w", 7)],
                  "d", policy="recheck")
        resolution = case.resolve()
        assert [a.fact for a in resolution.admitted if a.needs_recheck] == ["D1"]
        assert read("reference", case) == REFUSAL

    def test_stated_derivations_recompute_under_recompute(self) -> None:
        """The paper's example: 10 a week, 20 stated for two weeks, the week drops to 7. Under
        ``recompute`` the reference and ungoverned answer 14; quote-stated and no-recompute
        quote 20; without the policy the stated value is withheld as today."""
        events = [fact(1, "W1", "snacks.weekly", 10),
                  fact(2, "D1", "snacks.total", 20, kind="derived", depends_on=["W1"],
                       derivation="{snacks.weekly} * 2"),
                  fact(3, "W2", "snacks.weekly", 7)]
        case = mk(events, "snacks.total", policy="recompute")
        said = {name: read(name, case) for name in ("reference", "ungoverned", "quote-stated",
                                                     "no-recompute", "eager-invalidation")}
        assert said == {"reference": "14", "ungoverned": "14", "quote-stated": "20",
                        "no-recompute": "20", "eager-invalidation": REFUSAL}
        assert read("reference", mk(events, "snacks.total")) == REFUSAL
        assert read("quote-stated", mk(events, "snacks.total")) == "20"

    def test_quote_stated_keeps_governance(self) -> None:
        """quote-stated ignores only a stated derivation's inputs: a hidden derived fact stays
        hidden, an input-free reading of a restricted input is quoted, and a derived fact with
        no stated derivation is governed exactly as the reference governs it."""
        hidden_input = mk([fact(1, "S", "pay", 5000, visibility={"roles": ["payroll"]}),
                           fact(2, "M", "match", 400, kind="derived", depends_on=["S"],
                                derivation="{pay} * 8%")], "match", policy="recompute")
        assert (read("reference", hidden_input), read("quote-stated", hidden_input)) == (REFUSAL, "400")
        hidden_fact = mk([fact(1, "S", "pay", 5000),
                          fact(2, "M", "match", 400, kind="derived", depends_on=["S"],
                               derivation="{pay} * 8%", visibility={"roles": ["payroll"]})],
                         "match", policy="recompute")
        assert read("quote-stated", hidden_fact) == REFUSAL
        plain = mk([fact(1, "W1", "w", 10), fact(2, "D1", "d", 20, kind="derived", depends_on=["W1"]),
                    fact(3, "W2", "w", 7)], "d", policy="recompute")
        assert read("quote-stated", plain) == read("reference", plain) == REFUSAL

    def test_quote_stated_ignores_a_failed_derivation(self) -> None:
        """A derivation that fails over the current inputs (division by zero) is excluded by Γ;
        quote-stated never evaluates it and quotes the stated value."""
        case = mk([fact(1, "I", "items", 2400), fact(2, "N1", "people", 6),
                   fact(3, "L", "load", 400, kind="derived", depends_on=["I", "N1"],
                        derivation="{items} / {people}"),
                   fact(4, "N2", "people", 0)], "load", policy="recompute")
        assert {x.fact: x.codes for x in case.resolve().excluded} == {
            "L": ("derivation_failed",), "N1": ("superseded",)}
        assert (read("reference", case), read("quote-stated", case)) == (REFUSAL, "400")

    def test_bounds(self) -> None:
        """always-refuse always refuses; always-answer falls back until it has something."""
        hidden = mk([fact(1, "F1", "k", "secret", visibility={"roles": ["board"]}), fact(2, "F2", "o", "z")])
        assert read("always-refuse", hidden) == REFUSAL
        assert read("always-answer", hidden) == "secret"
        assert read("always-answer", mk([fact(1, "F1", "o", "z")])) == "z"

    def test_several_probe_keys(self) -> None:
        """Answers to several keys are joined; all refusals are one refusal."""
        case = mk([fact(1, "F1", "a", "1"), fact(2, "F2", "b", "2")], ["a", "b"])
        assert read("reference", case) == "1; 2"
        assert read("reference", mk([fact(1, "F1", "c", "1")], ["a", "b"])) == REFUSAL


# -- the corpus checks ------------------------------------------------------------------------


class TestCorpusDiscriminates:
    @pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
    def test_reference_passes(self, case: Case) -> None:
        """The reference reading grades gold on every case."""
        assert grade_answer(case, READERS["reference"](case)) == "gold"

    @pytest.mark.parametrize("case", TRAPS, ids=lambda c: c.id)
    def test_trap_signature(self, case: Case) -> None:
        """A trap is failed by at least one lazy reader, and its failing readers are its signature."""
        failing = failing_readers(case)
        assert set(failing) & set(LAZY_READERS), case.id
        assert failing == case.signature

    @pytest.mark.parametrize("case", TRAPS, ids=lambda c: c.id)
    def test_trap_pools_are_closed_over_the_lazy_readings(self, case: Case) -> None:
        """Every lazy reader's answer names exactly one pool option: gold, drift or the refusal."""
        assert case.pool is not None
        for name in LAZY_READERS:
            assert grade(READERS[name](case), case.pool) in ("gold", "drift", "other"), name

    def test_anti_traps(self) -> None:
        """Every anti-trap is passed by the anchored reading and failed by eager invalidation,
        and by no other lazy reader."""
        anti = [c for c in TRAPS if c.mode == "anti-trap"]
        assert len(anti) >= 4
        for case in anti:
            assert grade_answer(case, READERS["reference"](case)) == "gold"
            assert grade_answer(case, READERS["eager-invalidation"](case)) != "gold"
            assert set(case.signature or ()) & set(LAZY_READERS) == {"eager-invalidation"}

    def test_every_pair_fails_a_bound(self) -> None:
        """Always-answer or always-refuse fails each pair (on at least one side)."""
        sides: dict[str, list[Case]] = defaultdict(list)
        for case in CASES:
            if case.pair is not None:
                sides[case.pair].append(case)
        assert len(sides) >= 42
        for pair, members in sides.items():
            failed = {name for name in ("always-answer", "always-refuse") for c in members
                      if grade_answer(c, READERS[name](c)) != "gold"}
            assert failed, pair

    def test_positive_sides_defeat_refusing_on_any_withholding(self) -> None:
        """A reader refusing whenever anything is withheld fails every positive side."""
        for case in CASES:
            if case.side == "positive":
                assert case.resolve().excluded, case.id
                assert grade_answer(case, REFUSAL) != "gold", case.id
