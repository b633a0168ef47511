"""The admissibility audit: every corpus pair passes it, and each way of breaking a pair is
caught and named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from gamma.conformance.admissibility import MARKERS, AdmissibilityReport, audit_pairs
from gamma.conformance.cases import AXES, Case, load_cases, parse_case

ROOT = Path(__file__).resolve().parent.parent
PAIRS = load_cases(ROOT / "fixtures", suite="counterfactual")
REPORT = audit_pairs(PAIRS)


def sides(pair: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    found = {c.side: c for c in PAIRS if c.pair == pair}
    pos, neg = found["positive"], found["counterfactual"]
    assert pos.path is not None
    return copy.deepcopy(pos.to_dict()), copy.deepcopy(neg.to_dict()), pos.path


def audit(pos: dict[str, Any], neg: dict[str, Any], path: Path) -> tuple[str, ...]:
    cases = [parse_case(body, path=path) for body in (pos, neg) if body]
    (result,) = audit_pairs(cases).pairs
    return result.problems


class TestCorpus:
    def test_every_pair_is_admissible(self) -> None:
        """All corpus pairs pass, all seven axes."""
        assert REPORT.ok, [(p.pair, p.problems) for p in REPORT.rejected]
        assert len(REPORT.pairs) == len(PAIRS) // 2 >= 42
        assert {p.axis for p in REPORT.pairs} == set(AXES)

    def test_one_marked_variable_per_pair(self) -> None:
        """Each pair differs in exactly one field, a marker of its axis."""
        for p in REPORT.pairs:
            assert len(p.variable) == 1, p.pair
            assert p.axis is not None and p.variable[0].split(".", 1)[1] in MARKERS[p.axis]

    def test_similarity(self) -> None:
        """Wording is identical (text similarity 1.0); serialized events differ only a little."""
        assert all(p.text_similarity == 1.0 for p in REPORT.pairs)
        assert all(0.9 < p.similarity < 1.0 for p in REPORT.pairs)
        assert REPORT.mean_similarity is not None and 0.9 < REPORT.mean_similarity < 1.0
        assert REPORT.to_dict()["admitted"] == len(REPORT.pairs)

    def test_report_is_frozen(self) -> None:
        """The report and its entries are immutable values."""
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            REPORT.pairs = ()  # type: ignore[misc]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            REPORT.pairs[0].problems = ()  # type: ignore[misc]
        assert isinstance(REPORT, AdmissibilityReport)


def _drop_last(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["events"].pop()


def _swap_type(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    last = neg["events"][-1]
    neg["events"][-1] = {k: last[k] for k in ("id", "ts", "actor", "tenant")} | {
        "type": "assert", "fact": "Z9", "key": "z", "value": "z"}


def _question(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["question"] = neg["question"] + " Be precise."


def _wording(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["events"][0]["value"] = "a different decoy value"


def _two_variables(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["events"][1]["valid_until"] = "2026-03-20T00:00:00Z"


def _identical(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["events"] = copy.deepcopy(pos["events"])
    neg["pool"] = copy.deepcopy(pos["pool"])
    neg["expect"] = copy.deepcopy(pos["expect"])


def _same_truth(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["pool"] = copy.deepcopy(pos["pool"])


def _no_decoys(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    for body in (pos, neg):
        for e in body["events"][:2]:
            e.pop("visibility", None)
            e.pop("valid_until", None)
            e.pop("authority", None)
        body["expect"] = {}


def _actor(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg["actor"] = {**neg["actor"], "roles": ["finance", *neg["actor"]["roles"]]}


def _missing_side(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    neg.clear()


def _unmarked(pos: dict[str, Any], neg: dict[str, Any]) -> None:
    for body, until in ((pos, "2026-03-20T00:00:00Z"), (neg, "2026-03-21T00:00:00Z")):
        body["events"][2]["valid_until"] = until
        body["events"][2]["visibility"] = {"roles": ["sales"]}


MUTATIONS: list[tuple[str, Callable[[dict[str, Any], dict[str, Any]], None], str]] = [
    ("event count", _drop_last, "event count differs"),
    ("type sequence", _swap_type, "event-type sequence differs"),
    ("question", _question, "question differs"),
    ("wording", _wording, "wording differs beyond the governance variable: events[0].value"),
    ("two variables", _two_variables, "more than one governance variable"),
    ("identical", _identical, "no governance variable"),
    ("same ground truth", _same_truth, "the ground truth is the same on both sides"),
    ("no decoys", _no_decoys, "the positive side carries no unrelated governed decoy"),
    ("actor", _actor, "actor differs"),
    ("missing side", _missing_side, "needs exactly one counterfactual side, has 0"),
    ("unmarked variable", _unmarked, "not a marker of access_control: events[2].valid_until"),
]


class TestRejections:
    @pytest.mark.parametrize(("name", "mutate", "problem"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
    def test_rejected(self, name: str, mutate: Callable[[dict[str, Any], dict[str, Any]], None],
                      problem: str) -> None:
        """Each broken pair is rejected with a problem that names what is wrong."""
        pos, neg, path = sides("cf-access_control-sales")
        mutate(pos, neg)
        problems = audit(pos, neg, path)
        assert any(problem in p for p in problems), problems

    def test_model_decidable_needs_no_marker(self) -> None:
        """A model-decidable pair may vary a field that is no marker of its axis."""
        pos, neg, path = sides("cf-access_control-sales")
        _unmarked(pos, neg)
        for body in (pos, neg):
            body["decidable_by"] = "model"
        assert not any("marker" in p for p in audit(pos, neg, path))

    def test_sides_of_two_pairs_do_not_mix(self) -> None:
        """Pairs are grouped by their pair id, each audited on its own."""
        report = audit_pairs([c for c in PAIRS if c.axis == "supersession"])
        assert len(report.pairs) == 6 and report.ok

    def test_cases_without_pairs_are_ignored(self) -> None:
        """Non-pair cases do not enter the audit."""
        others = load_cases(ROOT / "fixtures", suite="factorial")
        assert audit_pairs(others).pairs == ()

    def test_duplicate_side(self) -> None:
        """A side given twice is rejected."""
        pos, neg, path = sides("cf-scope_binding-hr")
        twin = copy.deepcopy(pos) | {"id": pos["id"] + "-twin"}
        cases: list[Case] = [parse_case(b, path=path) for b in (pos, twin, neg)]
        (result,) = audit_pairs(cases).pairs
        assert "needs exactly one positive side, has 2" in result.problems
