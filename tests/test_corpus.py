"""The conformance corpus: it is what the generator builds, it covers what the issue asks,
the resolver agrees with every designed expectation, and the case loader names culprits.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gamma import InputError
from gamma.conformance.cases import (
    APPLICABILITY,
    AXES,
    CELLS,
    FACTORIAL_CELLS,
    GOVERNANCE,
    MODES,
    Case,
    load_cases,
    parse_case,
)
from gamma.conformance.model import Claimed
from gamma.conformance.readers import REFUSAL, reference
from gamma.core.terms.errors import (
    ActorError,
    DuplicateIdError,
    MissingFieldError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.model import Assert, Experience, Grant, Retract, Revoke
from gamma.scoring.tokens import matches, value_tokens

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES: tuple[Case, ...] = load_cases(FIXTURES)
BY_ID = {case.id: case for case in CASES}
SUITES = ("counterfactual", "factorial", "trap", "adversarial")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fixtures_generate", FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


def stale(admitted: Any) -> Any:
    """The stated value Γ replaced by recomputing (issue 29), else None."""
    record = getattr(admitted, "stale", None)
    return None if record is None else record.value


def of(suite: str) -> list[Case]:
    return [case for case in CASES if case.suite == suite]


class TestGenerator:
    def test_disk_matches_the_default_seed(self) -> None:
        """The files on disk are exactly what `generate.py` builds from its default seed."""
        wanted = GENERATE.build(GENERATE.DEFAULT_SEED)
        present = GENERATE.on_disk()
        assert sorted(present) == sorted(wanted)
        assert [p for p in wanted if present[p] != wanted[p]] == []

    def test_check_mode(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`--check` exits 0 on the committed corpus and 1 when another seed would change it."""
        assert GENERATE.main(["--check"]) == 0
        assert GENERATE.main(["--check", "--seed", "7"]) == 1
        assert "differs: fixtures/" in capsys.readouterr().err

    def test_deterministic(self) -> None:
        """Two builds from one seed are byte-identical."""
        assert GENERATE.build(11) == GENERATE.build(11)

    def test_other_seeds_keep_the_design(self, tmp_path: Path) -> None:
        """Another seed changes surface values only: same files, and every expectation still holds."""
        built = GENERATE.build(7)
        assert sorted(built) == sorted(GENERATE.build(GENERATE.DEFAULT_SEED))
        for relative, text in built.items():
            target = tmp_path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (tmp_path / "policies").symlink_to(ROOT / "policies")
        cases = load_cases(tmp_path)
        assert len(cases) == len(CASES)
        for case in cases:
            assert case.expect.mismatches(Claimed.of(case.resolve())) == (), case.id
            assert case.pool is not None
            assert case.pool.gold == (reference(case),) or reference(case) in case.pool.gold, case.id


class TestCoverage:
    def test_suites_present(self) -> None:
        """Every generated suite has cases, and every case has a question, probe and pool."""
        counts = Counter(case.suite for case in CASES)
        assert all(counts[s] > 0 for s in SUITES), counts
        for case in CASES:
            assert case.question and case.probe and case.pool is not None, case.id

    def test_pairs_per_axis(self) -> None:
        """Seven axes, at least six pairs each, across at least four domains, both sides each."""
        sides: dict[str, set[str]] = defaultdict(set)
        pairs: dict[str, set[str]] = defaultdict(set)
        domains: dict[str, set[str]] = defaultdict(set)
        for case in of("counterfactual"):
            assert case.axis is not None and case.pair is not None and case.side is not None
            sides[case.pair].add(case.side)
            pairs[case.axis].add(case.pair)
            domains[case.axis].add(case.domain or "")
        assert set(pairs) == set(AXES)
        for axis in AXES:
            assert len(pairs[axis]) >= 6, axis
            assert len(domains[axis]) >= 4, axis
        assert all(s == {"positive", "counterfactual"} for s in sides.values())

    def test_every_axis_is_engine_decidable(self) -> None:
        """Every pair is labelled engine-decidable, and the engine decides it: the reference
        reading grades gold on both sides and differs between them."""
        by_pair: dict[str, dict[str, Case]] = defaultdict(dict)
        for case in of("counterfactual"):
            assert case.decidable_by == "engine", case.id
            assert case.paper_decidable_by in ("engine", "model")
            by_pair[case.pair or ""][case.side or ""] = case
        decided = set()
        for sides in by_pair.values():
            pos, neg = sides["positive"], sides["counterfactual"]
            assert reference(pos) != reference(neg), pos.pair
            assert reference(pos) in pos.pool.gold and reference(neg) in neg.pool.gold  # type: ignore[union-attr]
            decided.add(pos.axis)
        assert decided == set(AXES)

    def test_factorial_cells(self) -> None:
        """All 18 cells, at least two scenarios each, labelled governance/applicability."""
        cells = Counter(case.cell or "" for case in of("factorial"))
        assert set(cells) == set(CELLS) and len(CELLS) == 18
        assert min(cells.values()) >= 2
        assert {c.split("/")[0] for c in cells} == set(GOVERNANCE)
        assert {c.split("/")[1] for c in cells} == set(APPLICABILITY)

    def test_trap_modes(self) -> None:
        """Each failure mode has at least four traps, in all three domains of the paper."""
        modes: dict[str, list[Case]] = defaultdict(list)
        for case in of("trap"):
            modes[case.mode or ""].append(case)
        assert set(modes) == set(MODES)
        for mode, cases in modes.items():
            assert len(cases) >= 4, mode
            assert {c.domain for c in cases} == {"research", "shopping", "finance"}, mode
            assert all(c.signature is not None for c in cases)

    def test_recompute_cases(self) -> None:
        """Issue 29's cases under the ``recompute`` policy: the paper's snacks example (20
        stated, 14 recomputed), a two-link chain, a percentage, a headcount, an ``if``
        threshold, a hidden input (restricted, never recomputed), an expired input and a
        division by zero (``derivation_failed``), in all three domains; and one pair per
        domain whose positive gold is the recomputed value and counterfactual gold the stated
        one, differing only in the changing input."""
        recompute = {c.id: c for c in CASES if c.policy == "recompute"}
        assert {c.domain for c in recompute.values()} == {"shopping", "finance", "research"}
        snacks = recompute["trap-sequence-shopping-recompute"]
        assert snacks.pool is not None and (snacks.pool.gold, snacks.pool.drift) == (("14",), ("20",))
        (record,) = [a for a in snacks.resolve().admitted if a.fact == "D1"]
        assert record.value == 14 and stale(record) == 20
        chain = recompute["trap-sequence-finance-recompute"]
        assert {a.fact for a in chain.resolve().admitted if stale(a) is not None} == {"M1", "Y1"}
        excluded = {
            (c.id, x.fact): x.codes for c in recompute.values() for x in c.resolve().excluded
        }
        assert excluded[("trap-compound-finance-hidden", "M")] == ("dependency_restricted",)
        assert excluded[("trap-compound-shopping-expired", "D")] == ("dependency_invalidated",)
        assert excluded[("trap-compound-research-zero", "L")] == ("derivation_failed",)
        for case_id in ("trap-sequence-finance-percent", "trap-sequence-research-recompute",
                        "trap-status-research-recompute"):
            assert any(stale(a) is not None for a in recompute[case_id].resolve().admitted), case_id
        pairs = [c for c in recompute.values() if c.suite == "counterfactual"]
        assert len(pairs) == 6
        for case in pairs:
            derived = [a for a in case.resolve().admitted if a.key in case.probe]
            assert len(derived) == 1, case.id
            # positive: gold is the recomputed value (the stated one is stale); counterfactual:
            # the stated value stands, nothing recomputed differs
            assert (stale(derived[0]) is not None) == (case.side == "positive"), case.id
            assert case.pool is not None and reference(case) in case.pool.gold
        assert all(c.signature and "quote-stated" in c.signature
                   for c in recompute.values() if c.suite == "trap")

    def test_adversarial_attacks(self) -> None:
        """Every attack family of the issue is present."""
        attacks = Counter(case.attack for case in of("adversarial"))
        assert set(attacks) >= {"injection", "authority", "tenant", "race", "chain",
                                "restricted_after_use", "lookalike"}


class TestExpectations:
    @pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
    def test_resolver_agrees(self, case: Case) -> None:
        """Γ decides what the scenario was designed to decide."""
        assert case.expect.mismatches(Claimed.of(case.resolve())) == ()

    def test_refusals_use_the_canonical_phrase(self) -> None:
        """Wherever the key has no current value the gold is exactly the one refusal phrase."""
        for case in CASES:
            assert case.pool is not None
            if reference(case) == REFUSAL:
                assert case.pool.gold == (REFUSAL,), case.id
            else:
                assert REFUSAL not in case.pool.gold, case.id

    def test_factorial_verdicts_follow_the_table(self) -> None:
        """Each factorial case has one experience using the governed fact; its expected
        verdict is the table's for the cell."""
        for case in of("factorial"):
            experiences = [e for e in case.events() if isinstance(e, Experience)]
            assert len(experiences) == 1 and experiences[0].uses, case.id
            assert experiences[0].applicability == (case.cell or "").split("/")[1]
            assert dict(case.expect.experiences) == {experiences[0].experience: FACTORIAL_CELLS[case.cell or ""]}

    def test_factorial_obsolete_details_never_coincide_with_gold(self) -> None:
        """No salient token of a withheld or substituted used fact matches a token of the
        gold answer (else carryover could not be told from a correct answer)."""
        for case in of("factorial"):
            assert case.pool is not None
            facts = {e.fact: e for e in case.events() if isinstance(e, Assert)}
            resolution = case.resolve()
            excluded = {x.fact for x in resolution.excluded}
            gold = [t for g in case.pool.gold for t in value_tokens(g)]
            for x in resolution.experiences:
                for reason in x.reasons:
                    if reason.fact in excluded:
                        for token in value_tokens(facts[reason.fact].value):
                            assert not any(matches(token, g) for g in gold), (case.id, token.text)

    def test_positive_pairs_carry_decoys(self) -> None:
        """A positive side lists a withheld fact of another key than the probe."""
        for case in of("counterfactual"):
            if case.side != "positive":
                continue
            keys = {e.fact: e.key for e in case.events() if isinstance(e, Assert)}
            assert any(keys.get(f) not in case.probe for f in case.expect.excluded), case.id


class TestAdversarial:
    def test_injected_keys_and_ids_stay_inert(self) -> None:
        """Injected text never becomes a context line or section of its own."""
        sections = {"## Binding", "## Preferences", "## Needs recheck", "## Known unknowns"}
        for case in of("adversarial"):
            if case.attack != "injection":
                continue
            lines = case.resolve().render("context").splitlines()
            assert lines[0].startswith("# Authorized state for ")
            for line in lines[1:]:
                assert line in sections or line.startswith("- "), (case.id, line)
            headers = [line for line in lines if line.startswith("## ")]
            assert len(headers) == len(set(headers)), case.id
            assert not any(line.startswith(("- [F0]", "- [F9]")) for line in lines), case.id

    def test_chains_have_a_thousand_links(self) -> None:
        """The long chains are 1,000 asserts, each linked to the one before."""
        for case in of("adversarial"):
            if case.attack != "chain":
                continue
            asserts = [e for e in case.events() if isinstance(e, Assert)]
            assert len(asserts) == 1000 and case.log is not None
            links = [e.supersedes or e.depends_on for e in asserts[1:]]
            assert all(link == (prev.fact,) for link, prev in zip(links, asserts)), case.id

    def test_chain_reasons_stay_short(self) -> None:
        """A dependency reason at the end of a 1,000-link chain names the link below and the
        origin, not the whole chain (SPEC §4, phase 4)."""
        case = BY_ID["adv-chain-dependency-1000-middle"]
        (last,) = [x for x in case.resolve().excluded if x.fact == "K0999"]
        (reason,) = last.reasons
        retract = [e.id for e in case.events() if isinstance(e, Retract) and e.fact == "K0500"]
        assert (reason.code, reason.facts, reason.events) == (
            "dependency_invalidated", ("K0500", "K0998"), tuple(retract))

    def test_races_sit_on_the_probe_time(self) -> None:
        """Grant/revoke races are stamped at t, or one second either side of it."""
        offsets = set()
        for case in of("adversarial"):
            if case.attack == "race":
                for e in case.events():
                    if isinstance(e, (Grant, Revoke)):
                        offsets.add((e.ts - case.at).total_seconds())
        assert {-1.0, 0.0, 1.0} <= offsets

    def test_lookalikes_are_cyrillic(self) -> None:
        """Look-alike cases really carry Cyrillic letters next to their Latin twins."""
        for case in of("adversarial"):
            if case.attack == "lookalike":
                text = json.dumps(case.to_dict(), ensure_ascii=False)
                assert any("\u0400" <= ch <= "\u04ff" for ch in text), case.id

    def test_corpus_size_is_reasonable(self) -> None:
        """The whole generated corpus stays under 2 MB."""
        size = sum(len(text.encode()) for text in GENERATE.on_disk().values())
        assert size < 2_000_000


# -- the case loader --------------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "id": "t1",
    "suite": "adversarial",
    "question": "What discount?",
    "probe": ["discount"],
    "actor": {"id": "alice", "tenant": "acme"},
    "at": "2026-03-02T10:00:00Z",
    "events": [
        {"id": "e1", "type": "assert", "ts": "2026-03-01T09:00:00Z", "actor": "crm",
         "tenant": "acme", "fact": "F1", "key": "discount", "value": "15%"},
        {"id": "e2", "type": "assert", "ts": "2026-03-01T09:01:00Z", "actor": "crm",
         "tenant": "acme", "fact": "F2", "key": "discount", "value": "20%", "scope": "atlas"},
    ],
    "expect": {"admitted": ["F1"], "excluded": {"F2": ["out_of_scope"]}},
    "pool": {"gold": ["15%"], "drift": ["20%"]},
}


def write_case(path: Path, body: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["{"]
    items = list(body.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if key == "events":
            lines.append('  "events": [')
            lines += [f"    {json.dumps(e)}{',' if j < len(value) - 1 else ''}" for j, e in enumerate(value)]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class TestLoading:
    def test_one_case_per_file(self, tmp_path: Path) -> None:
        """A .json file holds one case; its events are validated gamma events."""
        (case,) = load_cases(write_case(tmp_path / "a.json", GOOD))
        assert case.id == "t1" and case.actor.tenant == "acme" and len(case.events()) == 2
        assert case.expect.mismatches(Claimed.of(case.resolve())) == ()
        assert case.line is None and case.path == tmp_path / "a.json"

    def test_jsonl_suite(self, tmp_path: Path) -> None:
        """A .jsonl file holds one case per line; each case remembers its line."""
        second = {**GOOD, "id": "t2"}
        path = tmp_path / "suite.jsonl"
        path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(second) + "\n", encoding="utf-8")
        cases = load_cases(path)
        assert [(c.id, c.line) for c in cases] == [("t1", 1), ("t2", 3)]

    def test_log_relative_to_the_case(self, tmp_path: Path) -> None:
        """`log` names a JSONL file relative to the case file."""
        logs = tmp_path / "cases" / "logs"
        logs.mkdir(parents=True)
        (logs / "x.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in GOOD["events"]))
        body = {k: v for k, v in GOOD.items() if k != "events"} | {"log": "logs/x.events.jsonl"}
        (case,) = load_cases(write_case(tmp_path / "cases" / "c.json", body))
        assert case.log == "logs/x.events.jsonl" and len(case.events()) == 2

    def test_event_error_names_file_line_and_field(self, tmp_path: Path) -> None:
        """A bad event is reported at its own physical line with a dotted field path."""
        body = json.loads(json.dumps(GOOD))
        body["events"][1]["visibility"] = {"roles": "sales"}
        path = write_case(tmp_path / "bad.json", body)
        with pytest.raises(InputError) as info:
            load_cases(path)
        err = info.value
        assert err.source == str(path) and err.field == "events[1].visibility.roles"
        assert path.read_text().splitlines()[(err.line or 0) - 1].lstrip().startswith('{"id": "e2"')

    def test_reference_error_names_the_event(self, tmp_path: Path) -> None:
        """A reference to an unknown fact names the referring event's field."""
        body = json.loads(json.dumps(GOOD))
        body["events"][1]["supersedes"] = ["F9"]
        with pytest.raises(InputError) as info:
            load_cases(write_case(tmp_path / "bad.json", body))
        assert info.value.field == "events[1].supersedes[0]"

    def test_jsonl_error_names_the_line(self, tmp_path: Path) -> None:
        """In a suite file the error names the case's line."""
        path = tmp_path / "suite.jsonl"
        path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "id": "t2", "at": "yesterday"}) + "\n")
        with pytest.raises(ValueTypeError) as info:
            load_cases(path)
        assert (info.value.line, info.value.field) == (2, "at")

    @pytest.mark.parametrize(
        ("change", "error", "field"),
        [
            ({"colour": "red"}, UnknownFieldError, "colour"),
            ({"suite": "nope"}, ValueTypeError, "suite"),
            ({"probe": []}, ValueTypeError, "probe"),
            ({"expect": {"admitted": ["F1"], "verdicts": {}}}, UnknownFieldError, "expect.verdicts"),
            ({"expect": {"excluded": {"F2": ["gone"]}}}, ValueTypeError, "expect.excluded.F2"),
            ({"expect": {"experiences": {"X": "MAYBE"}}}, ValueTypeError, "expect.experiences.X"),
            ({"pool": {"gold": []}}, ValueTypeError, "pool"),
            ({"actor": {"id": "alice"}}, ActorError, "actor.tenant"),
            ({"side": "positive"}, MissingFieldError, "pair"),
            ({"mode": "status"}, ValueTypeError, "mode"),
            ({"policy": "no-such-policy"}, ValueTypeError, "policy"),
            ({"signature": ["lazy-bones"]}, ValueTypeError, "signature"),
        ],
    )
    def test_validation(self, tmp_path: Path, change: dict[str, Any], error: type[InputError],
                        field: str) -> None:
        """Every malformed field is an InputError naming the file, a line and the field."""
        body = {**GOOD, **change}
        if "mode" in change:
            body["mode"] = "sideways"
        path = write_case(tmp_path / "bad.json", body)
        with pytest.raises(error) as info:
            load_cases(path)
        assert info.value.field == field and info.value.source == str(path)
        assert info.value.line is not None

    def test_missing_required_field(self, tmp_path: Path) -> None:
        """A generated suite's case needs a pool; an imported one does not."""
        body = {k: v for k, v in GOOD.items() if k != "pool"}
        with pytest.raises(MissingFieldError) as info:
            load_cases(write_case(tmp_path / "a.json", body))
        assert info.value.field == "pool"
        (case,) = load_cases(write_case(tmp_path / "b.json", {**body, "suite": "imported"}))
        assert case.pool is None

    def test_pool_without_gold_is_refused(self, tmp_path: Path) -> None:
        """A pool that names no gold answer cannot grade anything, in every suite."""
        body = {**GOOD, "suite": "imported", "pool": {"drift": ["20%"]}}
        with pytest.raises(ValueTypeError):
            load_cases(write_case(tmp_path / "a.json", body))

    def test_duplicate_case_ids(self, tmp_path: Path) -> None:
        """Case ids are unique across everything loaded."""
        write_case(tmp_path / "a.json", GOOD)
        write_case(tmp_path / "b.json", GOOD)
        with pytest.raises(DuplicateIdError):
            load_cases(tmp_path)

    def test_directory_walk_skips_logs_and_actors(self, tmp_path: Path) -> None:
        """Walking a directory reads case files and skips event logs and actor files."""
        write_case(tmp_path / "s" / "a.json", GOOD)
        (tmp_path / "s" / "actor.json").write_text('{"id": "alice", "tenant": "acme"}')
        (tmp_path / "s" / "log.jsonl").write_text(json.dumps(GOOD["events"][0]) + "\n")
        assert [c.id for c in load_cases(tmp_path)] == ["t1"]
        assert [c.id for c in load_cases(FIXTURES / "examples")] == []

    def test_suite_filter(self) -> None:
        """`suite=` keeps one suite."""
        assert {c.suite for c in load_cases(FIXTURES, suite="trap")} == {"trap"}
        with pytest.raises(InputError):
            load_cases(FIXTURES, suite="nope")

    def test_policy_by_name(self, tmp_path: Path) -> None:
        """A bare policy name is found in the nearest policies/ directory."""
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "flag.toml").write_text('[dependencies]\nmode = "flag"\n')
        (case,) = load_cases(write_case(tmp_path / "deep" / "a.json", {**GOOD, "policy": "flag"}))
        assert case.get_policy().dependency_mode == "flag"

    def test_round_trip(self) -> None:
        """`to_json` gives back an equal case, events embedded."""
        for case in CASES[::9]:
            again = parse_case(case.to_dict(), path=case.path)
            assert again == case and again.events() == case.events()

    def test_request_has_no_answers(self) -> None:
        """What a system under test receives carries no expectation, pool or label."""
        request = BY_ID["cf-access_control-sales-counterfactual"].request()
        assert set(request) == {"id", "events", "actor", "at", "question", "probe", "policy"}
        assert "REJECT" not in json.dumps(request)
