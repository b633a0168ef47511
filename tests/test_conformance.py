"""The conformance runner: judging, metrics, JUnit XML, and a suite that fails loudly.

The corpus is still growing, so whole-corpus tests assert properties (every case passes,
every axis is perfect), not counts.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gamma
import gamma.core.resolving.phases as phases_module
import gamma.core.resolving.resolver as resolver_module
from gamma.cli.conformance import junit_xml
from gamma.conformance.cases import Case, load_cases
from gamma.conformance.external import Exchange, Reply, parse_reply
from gamma.conformance.runner import CaseResult, Report, external_said, judge_case, metrics, run
from gamma.core.terms.model import Retract

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
POSITIVE = FIXTURES / "counterfactual/cf-supersession-sales-positive.json"
FACTORIAL = FIXTURES / "factorial/fx-draft-adaptable-sales.json"


@pytest.fixture(scope="module")
def corpus() -> tuple[Case, ...]:
    return load_cases(FIXTURES)


@pytest.fixture(scope="module")
def reference(corpus: tuple[Case, ...]) -> Report:
    return run(corpus)


def edited(tmp_path: Path, source: Path, change: Callable[[dict[str, Any]], None],
           name: str | None = None) -> Case:  # fmt: skip
    """A fixture case with ``change`` applied, written to ``tmp_path`` and loaded back."""
    obj = json.loads(source.read_text())
    change(obj)
    path = tmp_path / (name or source.name)
    path.write_text(json.dumps(obj))
    return load_cases(path)[0]


class _Fake:
    """A stand-in for ExternalSystem.ask: replies with a fixed object."""

    def __init__(self, **reply: Any) -> None:
        self.reply = Reply(**reply)

    def ask(self, case: Case) -> Exchange:
        return Exchange(reply=self.reply)


class TestReference:
    def test_every_case_passes(self, reference: Report) -> None:
        """Γ meets every expectation of the corpus and answers every question gold."""
        failing = [(r.id, r.problems) for r in reference.results if r.status != "pass"]
        assert failing == []
        assert reference.ok and reference.exit_code == 0

    def test_metrics_are_perfect(self, reference: Report) -> None:
        """The reference leaks nothing, invents nothing, and gets every pair, verdict and trap."""
        m = reference.metrics
        assert m["gbr"]["k"] == 0 and m["urr"]["k"] == 0
        assert m["pool"]["gold"] == m["pool"]["n"] == len(reference.results)
        assert len(m["pairs"]) == 7
        assert all(p["pair_accuracy"]["k"] == p["pairs"] > 0 and p["incomplete"] == 0
                   for p in m["pairs"].values())
        f = m["factorial"]
        assert f["accuracy"]["k"] == f["n"] > 0 and f["false_refusal"]["k"] == 0
        assert f["correct_rejection"]["k"] == f["correct_rejection"]["n"]
        assert set(m["traps"]) == {"status", "salience", "sequence", "compound", "anti-trap"}
        assert all(t["k"] == t["n"] for t in m["traps"].values())

    def test_json_is_deterministic(self, corpus: tuple[Case, ...], reference: Report) -> None:
        """The same run gives the same report, byte for byte."""
        again = run(corpus[:40])
        first = run(corpus[:40])
        dump = json.dumps(first.to_dict(), sort_keys=True)
        assert dump == json.dumps(again.to_dict(), sort_keys=True)
        assert json.loads(dump)["system"] == {"kind": "reference", "name": "Γ (gamma.resolve)"}


class TestBrokenResolver:
    def test_ineffective_retracts_fail_loudly(self, corpus: tuple[Case, ...],
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
        """Break a rule of Γ (retracts do nothing): the suite fails, naming what broke."""
        monkeypatch.setitem(resolver_module._HANDLERS, Retract, lambda fold, pos, event: None)
        report = run(corpus)
        failed = [r for r in report.results if r.status == "fail"]
        assert not report.ok and report.exit_code == 1
        assert len(failed) >= 5
        text = " ".join(p for r in failed for p in r.problems)
        assert "retracted" in text and "insufficient_authority" in text
        assert {r.suite for r in failed} >= {"adversarial", "counterfactual"}

    def test_leaky_visibility_fails_access_control(self, corpus: tuple[Case, ...],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
        """Break another rule (everyone sees everything): every access-control pair breaks."""
        monkeypatch.setattr(phases_module, "_may_see", lambda *args, **kwargs: True)
        report = run([c for c in corpus if c.axis == "access_control"])
        assert report.metrics["pairs"]["access_control"]["pair_accuracy"]["k"] == 0
        assert report.exit_code == 1


class TestJudging:
    def test_unmet_expectation_fails(self, tmp_path: Path) -> None:
        """An expectation Γ does not meet is a failure naming it."""
        def expect_expired(o: dict[str, Any]) -> None:
            o["expect"]["admitted"] = []
            o["expect"]["excluded"]["P"] = ["expired"]
        case = edited(tmp_path, POSITIVE, expect_expired)
        result = judge_case(case, _ref(case), kind="reference")
        assert result.status == "fail"
        assert result.problems == ("excluded: P is admitted, expected ['expired']",)

    def test_answer_must_grade_gold(self, tmp_path: Path) -> None:
        """A reference answer outside gold fails, quoting the answer and its grade."""
        def swap(o: dict[str, Any]) -> None:
            o["pool"] = {"gold": ["$120,000"], "drift": ["$135,000"]}
        case = edited(tmp_path, POSITIVE, swap)
        result = judge_case(case, _ref(case), kind="reference")
        assert result.status == "fail" and result.grade == "drift"
        assert result.problems == ('answer "$135,000" grades drift, expected gold ["$120,000"]',)

    def test_imported_pool_is_informational(self, tmp_path: Path) -> None:
        """An imported case's pool (prose ground truth) is graded but decides nothing."""
        def imported(o: dict[str, Any]) -> None:
            o.update(suite="imported", pool={"gold": ["$120,000"]})
            for name in ("pair", "side", "axis", "decidable_by", "paper_decidable_by"):
                o.pop(name)
        case = edited(tmp_path, POSITIVE, imported)
        result = judge_case(case, _ref(case), kind="reference")
        assert result.status == "pass" and result.grade == "off_pool"
        reader = run([case], reader="latest-mention").results[0]
        assert reader.status == "skip" and reader.grade is not None

    def test_reference_answers_the_recomputed_value(self) -> None:
        """Under ``recompute`` Γ's answer is the value of its record, not the stated one: the
        paper's snacks case answers 14 (stated 20), and a stated derivation that fails to
        recompute (division by zero) is no answer."""
        snacks, zero = load_cases([FIXTURES / "trap/trap-sequence-shopping-recompute.json",
                                   FIXTURES / "trap/trap-compound-research-zero.json"])
        first, second = run([snacks, zero]).results
        assert (first.status, first.answer, first.grade) == ("pass", "14", "gold")
        assert (second.status, second.answer) == ("pass", "no current value")
        stated = run([snacks], reader="quote-stated").results[0]
        assert (stated.status, stated.answer, stated.grade) == ("fail", "20", "drift")

    def test_reader_verdict_is_read_off_the_answer(self, tmp_path: Path) -> None:
        """Readers state no verdict: refusal is REJECT, the used value its applicability."""
        case = load_cases(FACTORIAL)[0]  # draft/adaptable: Γ rejects
        refuse = run([case], reader="always-refuse").results[0]
        latest = run([case], reader="latest-mention").results[0]
        assert (refuse.verdict, latest.verdict) == ("REJECT", "ADAPT")
        assert refuse.expected_verdict == latest.expected_verdict == "REJECT"

    def test_always_refuse_is_the_baseline(self, corpus: tuple[Case, ...]) -> None:
        """The always-refuse reader scores exactly the always-refuse baseline."""
        f = run([c for c in corpus if c.suite == "factorial"], reader="always-refuse").metrics["factorial"]
        assert f["accuracy"] == f["always_refuse_accuracy"]
        assert f["correct_rejection"]["rate"] == f["false_refusal"]["rate"] == 1.0

    def test_reader_signature_agreement(self, corpus: tuple[Case, ...]) -> None:
        """On traps, a reader run reports whether each failure matches the recorded signature."""
        traps = [c for c in corpus if c.suite == "trap"]
        report = run(traps, reader="latest-mention")
        assert report.metrics["signature"]["n"] == len(traps)
        for r in report.results:
            assert r.in_signature == (r.grade != "gold")


class TestExternalReplies:
    def test_resolver_level_reply_matching_gamma_passes(self) -> None:
        case = load_cases(POSITIVE)[0]
        res = case.resolve()
        fake = _Fake(admitted=tuple(a.fact for a in res.admitted),
                     excluded={x.fact: x.codes for x in res.excluded},
                     experiences={x.experience: x.verdict for x in res.experiences})
        result = judge_case(case, external_said(case, fake), kind="external")  # type: ignore[arg-type]
        assert result.status == "pass" and result.answer == "$135,000" and result.grade == "gold"

    def test_resolver_level_reply_is_compared(self) -> None:
        """Wrong admissions, unknown facts and contradictions are each named."""
        case = load_cases(POSITIVE)[0]
        fake = _Fake(admitted=("Q", "D1", "ZZ"), excluded={"D1": ("access_denied",)},
                     needs_recheck=("P",))
        result = judge_case(case, external_said(case, fake), kind="external")  # type: ignore[arg-type]
        text = "\n".join(result.problems)
        for needle in ("ZZ is not a fact of the log", "D1 is both admitted and excluded",
                       "P needs recheck but is not admitted", "admitted: P is not admitted",
                       "excluded: Q is admitted", 'answer "$120,000" grades drift'):
            assert needle in text
        assert result.leaked and "bypass Q" in text

    def test_resolver_level_reply_gives_recomputed_values(self) -> None:
        """A reply names facts by id, so a recomputed value travels in ``values``: with it the
        paper's snacks case answers 14 and passes; without it the stated 20 is the answer."""
        case = load_cases(FIXTURES / "trap/trap-sequence-shopping-recompute.json")[0]
        res = case.resolve()
        ids = tuple(a.fact for a in res.admitted)
        excluded = {x.fact: x.codes for x in res.excluded}
        given = judge_case(case, external_said(case, _Fake(admitted=ids, excluded=excluded,  # type: ignore[arg-type]
                                                      values={"D1": 14})), kind="external")
        assert (given.status, given.answer, given.grade) == ("pass", "14", "gold"), given.problems
        assert not given.unsupported
        stated = judge_case(case, external_said(case, _Fake(admitted=ids, excluded=excluded)),  # type: ignore[arg-type]
                       kind="external")
        assert (stated.status, stated.answer, stated.grade) == ("fail", "20", "drift")

    @pytest.mark.parametrize(("values", "message"), [
        ({"W1": 14}, "values.W1 names a fact the reply does not admit"),
        ({"D1": 14.0}, "values.D1 must be a string, an integer or a boolean"),
        ({"D1": None}, "values.D1 must be a string, an integer or a boolean"),
    ])
    def test_values_are_checked(self, values: dict[str, Any], message: str) -> None:
        """``values`` may only give admitted facts a JSON string, integer or boolean."""
        with pytest.raises(ValueError, match=message):
            parse_reply({"id": "c", "admitted": ["D1"], "values": values}, "c")
        with pytest.raises(ValueError, match="needs 'admitted'"):
            parse_reply({"id": "c", "response": "14", "values": {"D1": 14}}, "c")

    def test_agent_level_leak_and_verdict_fail(self) -> None:
        """An agent-level answer fails on a leak or a wrong verdict, not only on its grade."""
        case = load_cases(FACTORIAL)[0]
        fake = _Fake(response="No current value, though the draft said 2026-05-12.", verdict="KEEP")
        result = judge_case(case, external_said(case, fake), kind="external")  # type: ignore[arg-type]
        kinds = {v.kind for v in result.findings}
        assert {"bypass", "verdict_mismatch"} <= kinds
        assert result.status == "fail" and result.verdict == "KEEP"

    def test_agent_level_clean_answer_passes(self) -> None:
        case = load_cases(FACTORIAL)[0]
        fake = _Fake(response="There is no current value.\nVERDICT: REJECT")
        result = judge_case(case, external_said(case, fake), kind="external")  # type: ignore[arg-type]
        assert result.status == "pass", result.problems
        assert result.verdict == "REJECT"  # stated by a VERDICT: line
        assert metrics([result])["factorial"]["accuracy"]["k"] == 1


class TestMetrics:
    def test_errors_count_as_wrong_where_cases_are_counted(self) -> None:
        """An errored side loses its pair; an errored factorial case is a wrong verdict."""
        rows = [
            CaseResult(id="a", suite="counterfactual", status="pass", answer="x", grade="gold",
                       pair="p", side="positive", axis="supersession", decidable_by="engine"),
            CaseResult(id="b", suite="counterfactual", status="error", problems=("boom",),
                       pair="p", side="counterfactual", axis="supersession"),
            CaseResult(id="c", suite="factorial", status="error", problems=("boom",),
                       cell="expired/applicable", expected_verdict="REJECT"),
            CaseResult(id="d", suite="trap", status="error", problems=("boom",), mode="status"),
        ]
        m = metrics(rows)
        assert m["pairs"]["supersession"]["pair_accuracy"] == {"k": 0, "n": 1, "rate": 0.0}
        assert m["pairs"]["supersession"]["delta"] == 1.0
        assert m["factorial"]["n"] == 1 and m["factorial"]["accuracy"]["k"] == 0
        assert m["traps"]["status"] == {"k": 0, "n": 1, "rate": 0.0}
        assert m["responses"] == 1 and m["gbr"]["n"] == 1 and m["pool"]["n"] == 1
        assert m["suites"]["counterfactual"] == {"cases": 2, "passed": 1, "failed": 0,
                                                 "errors": 1, "skipped": 0}


class TestJUnit:
    def test_counts_and_groups(self, reference: Report) -> None:
        root = ET.fromstring(junit_xml(reference))
        assert root.tag == "testsuites" and int(root.get("tests", "")) == len(reference.results)
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        assert set(suites) == {r.suite for r in reference.results}
        for name, node in suites.items():
            assert int(node.get("tests", "")) == len(node.findall("testcase"))
            assert int(node.get("tests", "")) == sum(r.suite == name for r in reference.results)
            assert node.get("failures") == node.get("errors") == "0"

    def test_failures_errors_skips_and_hostile_text(self) -> None:
        """Each status becomes its JUnit element; control characters cannot break the XML."""
        rows = (
            CaseResult(id="bad\x00id\nline", suite="trap", status="fail",
                       problems=("answer \x1b[31m grades drift", "second"), answer="x\x07"),
            CaseResult(id="e", suite="trap", status="error", problems=("system: no reply",)),
            CaseResult(id="s", suite="imported", status="skip"),
            CaseResult(id="ok", suite="imported", status="pass"),
        )
        report = Report(kind="external", name="x", results=rows, metrics=metrics(rows))
        root = ET.fromstring(junit_xml(report))
        assert (root.get("tests"), root.get("failures"), root.get("errors"),
                root.get("skipped")) == ("4", "1", "1", "1")
        failure = root.find(".//testcase/failure")
        assert failure is not None and "\\u001b[31m" in failure.get("message", "")
        assert "second" in (failure.text or "") and "\\u0007" in (failure.text or "")
        names = [t.get("name") for t in root.iter("testcase")]
        assert "bad\\u0000id\nline" in names
        assert root.find(".//testcase[@name='e']/error") is not None
        assert root.find(".//testcase[@name='s']/skipped") is not None


def _ref(case: Case) -> Any:
    from gamma.conformance.runner import reference_said

    return reference_said(case)


class TestCaseDirectory:
    """Issue 11: every ``.json`` in a case directory loads or is an error."""

    def test_misspelt_suite_is_an_error_not_a_skip(self, tmp_path: Path) -> None:
        obj = json.loads(POSITIVE.read_text())
        obj["siute"] = obj.pop("suite")
        (tmp_path / "a.json").write_text(json.dumps(obj))
        with pytest.raises(gamma.InputError) as info:
            load_cases(tmp_path)
        assert info.value.source == str(tmp_path / "a.json")

    def test_actors_and_logs_beside_cases_are_skipped(self, tmp_path: Path) -> None:
        (tmp_path / "case.json").write_text(POSITIVE.read_text())
        (tmp_path / "alice.json").write_text('{"id": "alice", "tenant": "acme", "roles": []}')
        (tmp_path / "log.jsonl").write_text('{"id": "e1"}\n')
        assert len(load_cases(tmp_path)) == 1
