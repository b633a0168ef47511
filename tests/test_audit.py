"""Audit records, replay and record diffs as a library (DESIGN §7, SPEC.md §10)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import AT, A, R, X, actor, log, stamp, ts

import gamma
from gamma import (
    InputError,
    JSONSyntaxError,
    MissingFieldError,
    PolicyError,
    UnknownFieldError,
    ValueTypeError,
    parse_events,
    resolve,
)
from gamma.audit.replay import (
    RECORD_FIELDS,
    Outcome,
    audit_record,
    check_record,
    diff_records,
    parse_audit,
    read_audit,
    record_digest,
    record_policy,
    replay,
    write_audit,
)
from gamma.core.terms.canonical import canonical_json, parse_ts
from gamma.core.terms.policy import DEFAULT_POLICY, Policy, load_policy

ROOT = Path(__file__).resolve().parent.parent

EVENTS = (
    A("F1", "region", "EMEA"),
    A("F2", "discount", "10%", scope="helios"),
    A("F3", "discount", "15%", scope="helios"),
    A("F4", "promo", "BOGO", status="draft"),
    A("F5", "severance", "$40,000", visibility={"roles": ["hr"]}),
    X("X1", uses=["F2"]),
    X("X2", uses=["F1"]),
)
WHO = actor(scope="helios")


def record_of(
    events: tuple[Any, ...], at: str = AT, policy: Policy = DEFAULT_POLICY
) -> dict[str, Any]:
    return audit_record(resolve(events, WHO, at, policy), events)


def with_later(*extra: dict[str, Any]) -> tuple[Any, ...]:
    """EVENTS plus ``extra`` appended (stamped after them)."""
    return parse_events([json.dumps(e) for e in stamp([*EVENTS, *extra])], source="later.jsonl")


class TestAuditRecord:
    def test_resolution_plus_engine_and_events(self) -> None:
        """The record is the resolution's JSON object plus engine and the covered event count."""
        events = log(*EVENTS)
        resolution = resolve(events, WHO, AT)
        record = audit_record(resolution, events)
        assert record == {**resolution.to_dict(), "engine": gamma.__version__, "events": 7}
        assert sorted(record) == list(RECORD_FIELDS)

    def test_events_counts_only_those_up_to_t(self) -> None:
        """Events after t are not covered: the count stops at the last event with ts <= t."""
        events = log(*EVENTS)
        assert record_of(events, at=ts(3))["events"] == 3
        assert record_of(events, at=ts(3.5))["events"] == 3
        assert record_of(events, at=ts(0))["events"] == 0

    def test_digest_is_the_resolutions(self) -> None:
        """``engine`` and ``events`` stay outside the digest, so it is the resolution's digest."""
        record = record_of(log(*EVENTS))
        assert record_digest(record) == record["digest"]


class TestWriteAudit:
    def test_canonical_json_and_newline(self, tmp_path: Path) -> None:
        """The file is the canonical JSON of the record and one newline."""
        events = log(*EVENTS)
        path = tmp_path / "a.json"
        record = write_audit(path, resolve(events, WHO, AT), events)
        assert path.read_bytes() == (canonical_json(record) + "\n").encode("utf-8")
        assert read_audit(path) == record

    def test_replaces_atomically_and_leaves_no_temp_file(self, tmp_path: Path) -> None:
        """An existing record is replaced whole; no temporary file is left behind."""
        events = log(*EVENTS)
        path = tmp_path / "a.json"
        path.write_text("old")
        write_audit(path, resolve(events, WHO, AT), events)
        assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
        assert read_audit(path)["events"] == 7

    def test_failed_write_keeps_the_old_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When the rename fails the old record stays intact and the temp file is removed."""
        events = log(*EVENTS)
        path = tmp_path / "a.json"
        path.write_text("old")

        def refuse(src: Any, dst: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "replace", refuse)
        with pytest.raises(InputError, match="cannot write audit record"):
            write_audit(path, resolve(events, WHO, AT), events)
        assert path.read_text() == "old"
        assert [p.name for p in tmp_path.iterdir()] == ["a.json"]

    def test_missing_directory_is_an_input_error(self, tmp_path: Path) -> None:
        """Writing into a directory that does not exist names the file."""
        events = log(*EVENTS)
        with pytest.raises(InputError) as exc:
            write_audit(tmp_path / "no" / "a.json", resolve(events, WHO, AT), events)
        assert exc.value.source == str(tmp_path / "no" / "a.json")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting a dotted/indexed path (``excluded[0].reasons[0].code``)."""

    def mutate(record: dict[str, Any]) -> None:
        target: Any = record
        parts = path.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = value

    return mutate


_DELETE = object()
MALFORMED = [
    ("missing log", _set("log", _DELETE), MissingFieldError, "log"),
    ("unknown field", _set("extra", 1), UnknownFieldError, "extra"),
    ("events negative", _set("events", -1), ValueTypeError, "events"),
    ("events a boolean", _set("events", True), ValueTypeError, "events"),
    ("engine empty", _set("engine", ""), ValueTypeError, "engine"),
    ("log not hex", _set("log", "XYZ"), ValueTypeError, "log"),
    ("policy upper-case", _set("policy", "A" * 64), ValueTypeError, "policy"),
    ("at without offset", _set("at", "2026-03-02T00:00:00"), ValueTypeError, "at"),
    ("actor unknown field", _set("actor.colour", "red"), UnknownFieldError, "actor.colour"),
    ("actor missing clearance", _set("actor.clearance", _DELETE), MissingFieldError,
     "actor.clearance"),
    ("admitted an object", _set("admitted", {}), ValueTypeError, "admitted"),
    ("admitted kind missing", _set("admitted[0].kind", _DELETE), MissingFieldError,
     "admitted[0].kind"),
    ("admitted value a list", _set("admitted[0].value", []), ValueTypeError, "admitted[0].value"),
    ("reason code unknown", _set("excluded[0].reasons[0].code", "gone"), ValueTypeError,
     "excluded[0].reasons[0].code"),
    ("reason events a string", _set("excluded[0].reasons[0].events", "e1"), ValueTypeError,
     "excluded[0].reasons[0].events"),
    ("verdict unknown", _set("experiences[0].verdict", "MAYBE"), ValueTypeError,
     "experiences[0].verdict"),
    ("bindings a list", _set("experiences[0].bindings", []), ValueTypeError,
     "experiences[0].bindings"),
    ("ignored extra field", _set("ignored", [{"event": "e", "code": "c", "fact": "f", "x": 1}]),
     UnknownFieldError, "ignored[0].x"),
    ("fact listed twice", lambda r: r["excluded"].append(dict(r["excluded"][0])), ValueTypeError,
     "excluded[3].fact"),
    ("stale without inputs", _set("admitted[0].stale", {"code": "recomputed", "value": 1}),
     UnknownFieldError, "admitted[0].stale"),
    ("a later format", _set("format", 2), ValueTypeError, "format"),
    ("format a boolean", _set("format", True), ValueTypeError, "format"),
]  # fmt: skip


class TestReadAudit:
    @pytest.mark.parametrize(
        ("mutate", "error", "field"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
    )
    def test_malformed_record_names_the_field(
        self, mutate: Callable[[dict[str, Any]], None], error: type[InputError], field: str
    ) -> None:
        """Each malformation raises the matching InputError naming the field."""
        record = record_of(log(*EVENTS))
        mutate(record)
        with pytest.raises(error) as exc:
            check_record(record, source="a.json")
        assert exc.value.field == field
        assert f"field {field!r}" in str(exc.value)
        assert isinstance(exc.value, ValueError)

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ('{"events": 1, "events": 2}', "events"),
            ('{"events": 1.5}', "events"),
            ("[1, 2]", None),
            ('{"a": ', None),
        ],
        ids=["duplicate key", "float", "not an object", "truncated"],
    )
    def test_malformed_json(self, text: str, field: str | None) -> None:
        """Strict JSON: duplicate keys, floats, non-objects and syntax errors are refused."""
        with pytest.raises(InputError) as exc:
            parse_audit(text, source="a.json")
        assert exc.value.field == field

    def test_missing_and_non_utf8_files(self, tmp_path: Path) -> None:
        """A missing file and bytes that are not UTF-8 are input errors naming the file."""
        with pytest.raises(InputError, match="no such audit record"):
            read_audit(tmp_path / "none.json")
        bad = tmp_path / "bad.json"
        bad.write_bytes(b'{"engine": "\xff"}')
        with pytest.raises(JSONSyntaxError, match="not UTF-8"):
            read_audit(bad)

    def test_pretty_printed_record_is_read(self, tmp_path: Path) -> None:
        """A record re-indented by a person still reads (and replays) as the same record."""
        record = record_of(log(*EVENTS))
        path = tmp_path / "pretty.json"
        path.write_text(json.dumps(record, indent=2))
        assert read_audit(path) == record
        assert replay(log(*EVENTS), read_audit(path)).ok


class TestReplay:
    def test_identical(self) -> None:
        """A record written today replays identically: same head, same resolution."""
        events = log(*EVENTS)
        result = replay(events, record_of(events))
        assert result.ok and result.head_ok and result.diff.same and result.record_digest_ok
        assert result.render().startswith("identical: replayed 7 events")
        assert json.loads(result.to_json())["ok"] is True

    def test_a_record_written_before_format_replays_identically(self) -> None:
        """A record without ``format`` (written before the field) is of format 1: it replays
        identically and its digest still holds (format and engine are not under it)."""
        events = log(*EVENTS)
        record = record_of(events)
        del record["format"]
        result = replay(events, check_record(record))
        assert result.ok and result.record_digest_ok and result.diff.same

    def test_later_events_do_not_disturb(self) -> None:
        """Events appended later, even with ts <= t, are outside the record's first `events`."""
        events = log(*EVENTS)
        record = record_of(events)
        grown = with_later(R("F1"), A("F6", "promo", "late"))
        assert grown[-1].ts <= parse_ts(AT)
        assert resolve(grown, WHO, AT).digest != record["digest"]
        result = replay(grown, record)
        assert result.ok
        assert (result.events, result.available) == (7, 9)

    def test_edited_event_names_the_head_mismatch(self) -> None:
        """Editing an event changes the chain head; replay fails and says so."""
        record = record_of(log(*EVENTS))
        edited = log(A("F1", "region", "APAC"), *EVENTS[1:])
        result = replay(edited, record)
        assert not result.ok and not result.head_ok
        assert result.record_head == record["log"] and result.head != record["log"]
        text = result.render()
        assert "head mismatch" in text and record["log"] in text and result.head in text
        assert 'F1 region: value: "EMEA" -> "APAC"' in text

    def test_truncated_log(self) -> None:
        """A log shorter than the record's count fails, saying how many events are missing."""
        record = record_of(log(*EVENTS))
        result = replay(log(*EVENTS[:3]), record)
        assert not result.ok and not result.head_ok
        assert "the log has 3 events, the record covers 7" in result.render()

    def test_policy_must_match(self) -> None:
        """A record made under a policy no candidate has is refused (PolicyError naming
        ``policy``); the caller's candidates and the named policies are looked through."""
        custom = Policy(authority_default="manager")
        events = log(*EVENTS)
        record = record_of(events, policy=custom)
        with pytest.raises(PolicyError) as exc:
            replay(events, record)
        assert exc.value.field == "policy" and "the named policy 'strict'" in str(exc.value)
        assert replay(events, record, candidates=[("mine", custom)]).ok
        assert replay(events, record, policy=custom).ok

    def test_named_policy_found(self) -> None:
        """A record made under a named policy (strict) replays without naming it."""
        strict = load_policy(ROOT / "policies" / "strict.toml")
        events = log(*EVENTS)
        record = record_of(events, policy=strict)
        assert record_policy(record) == strict
        assert replay(events, record).ok

    def test_other_policy_is_a_difference(self) -> None:
        """Replayed under a policy that is not the record's: never identical; says policy."""
        strict = Policy(authority_default="unverified")
        events = log(*EVENTS)
        result = replay(events, record_of(events), policy=strict)
        assert not result.ok
        assert [c.field for c in result.diff.fields if c.field == "policy"] == ["policy"]
        assert result.to_dict()["policy"]["ok"] is False
        assert result.render().splitlines()[1].startswith("policy: the record was made under")

    def test_engine_difference_is_a_note(self) -> None:
        """A record written by another gamma version still replays identically, with a note."""
        events = log(*EVENTS)
        record = {**record_of(events), "engine": "0.0.1"}
        result = replay(events, record)
        assert result.ok
        assert "note: engine 0.0.1" in result.render()

    def test_semantic_change_names_fact_and_codes(self) -> None:
        """An edited outcome in the record shows as a field-level diff naming fact and codes."""
        events = log(*EVENTS)
        record = record_of(events)
        f1 = next(a for a in record["admitted"] if a["fact"] == "F1")
        record["admitted"].remove(f1)
        retracted = {"code": "retracted", "events": ["e9"], "facts": []}
        record["excluded"].insert(0, {"fact": "F1", "key": "region", "reasons": [retracted]})
        result = replay(events, record)
        assert result.head_ok and not result.ok and not result.record_digest_ok
        (change,) = result.diff.facts
        assert (change.fact, change.change) == ("F1", "admitted")
        assert (change.a, change.b) == (Outcome("excluded", ("retracted",)), Outcome("admitted"))
        text = result.render()
        expected = "admitted in replay, not in record:\n  F1 region (record: excluded: retracted)"
        assert expected in text
        assert "the record was edited after it was written" in text

    def test_changed_codes_in_record(self) -> None:
        """A code added to an exclusion in the record is reported as changed codes."""
        events = log(*EVENTS)
        record = record_of(events)
        f4 = next(x for x in record["excluded"] if x["fact"] == "F4")
        f4["reasons"].append({"code": "expired", "events": ["e4"], "facts": []})
        text = replay(events, record).render()
        expected = "exclusion codes changed (record -> replay):\n"
        expected += "  F4 promo: draft, expired -> draft"
        assert expected in text

    def test_deterministic_across_calls(self) -> None:
        """Two replays of the same inputs give equal results and identical JSON."""
        events = log(*EVENTS)
        record = record_of(events)
        assert replay(events, record).to_json() == replay(events, record).to_json()


class TestDiffRecords:
    TIMELINE = (
        A("F1", "region", "EMEA"),  # e1
        A("F2", "promo", "BOGO", status="draft"),  # e2
        A("F3", "webinar", "WEB-1", valid_until=ts(5)),  # e3
        A("F4", "cap", "$150", authority="manager"),  # e4
        A("F5", "cap", "$120", scope="helios"),  # e5
        X("X1", uses=["F1"]),  # e6
        R("F2"),  # e7: the draft is now also retracted
        R("F1"),  # e8: X1 loses its fact
        A("F6", "cap", "$90", authority="executive"),  # e9: supersedes F4, outranks F5
        A("F7", "tone", "concise"),  # e10
        R("F6", authority="peer"),  # e11: too weak, ignored
    )

    def records(self) -> tuple[dict[str, Any], dict[str, Any]]:
        events = log(*self.TIMELINE)
        return record_of(events, at=ts(6)), record_of(events, at=ts(11))

    def test_different_times(self) -> None:
        """Two times: newly admitted and excluded facts, changed codes, reasons and verdicts."""
        a, b = self.records()
        diff = diff_records(a, b)
        assert not diff.same
        by_fact = {f.fact: f for f in diff.facts}
        assert by_fact["F7"].change == "admitted" and by_fact["F7"].a == Outcome("absent")
        assert by_fact["F1"].change == "excluded" and by_fact["F1"].b.codes == ("retracted",)
        assert by_fact["F4"].change == "excluded" and by_fact["F4"].b.codes == ("superseded",)
        assert by_fact["F6"].change == "admitted"
        assert by_fact["F2"].change == "codes"
        assert by_fact["F2"].a.codes == ("draft",)
        assert by_fact["F2"].b.codes == ("draft", "retracted")
        assert by_fact["F5"].change == "reasons"
        fields = [c.field for c in by_fact["F5"].fields]
        assert fields == ["reasons.outranked.events", "reasons.outranked.facts"]
        assert "F3" not in by_fact  # expired at both times
        (x1,) = diff.experiences
        assert (x1.experience, x1.a, x1.b) == ("X1", "KEEP", "REJECT")
        (ignored,) = diff.ignored
        assert (ignored.event, ignored.only_in) == ("e11", "b")
        assert [c.field for c in diff.fields] == ["at", "digest", "events", "log", "tree.root", "tree.size"]

    def test_render_names_facts_and_codes(self) -> None:
        """The text names each fact with its key and codes under a heading per kind of change."""
        a, b = self.records()
        text = diff_records(a, b).render()
        for line in [
            'at: "2026-03-01T09:06:00Z" -> "2026-03-01T09:11:00Z"',
            "admitted in B, not in A:\n  F6 cap (A: absent)\n  F7 tone (A: absent)",
            "excluded in B, not in A:\n  F1 region: retracted (A: admitted)",
            "  F4 cap: superseded (A: admitted)",
            "exclusion codes changed (A -> B):\n  F2 promo: draft -> draft, retracted",
            '  F5 cap: reasons.outranked.facts: ["F4"] -> ["F6"]',
            "experiences changed (A -> B):\n  X1: verdict KEEP -> REJECT",
            "ignored entries changed:\n  e11 insufficient_authority F6: only in B",
        ]:
            assert line in text

    def test_to_json_is_canonical(self) -> None:
        """The machine form is canonical JSON with the fact changes and their states."""
        a, b = self.records()
        out = diff_records(a, b).to_json()
        data = json.loads(out)
        assert canonical_json(data) == out
        assert data["same"] is False
        f2 = next(f for f in data["facts"] if f["fact"] == "F2")
        assert f2["a"] == {"state": "excluded", "codes": ["draft"]}
        assert f2["b"] == {"state": "excluded", "codes": ["draft", "retracted"]}

    def test_same_record(self) -> None:
        """A record compared with itself, or with another engine's copy, is the same."""
        a, _ = self.records()
        assert diff_records(a, a).same
        assert diff_records(a, a).render() == "no differences\n"
        other = diff_records(a, {**a, "engine": "9.9"})
        assert other.same and "note: engine" in other.render()

    def test_admitted_entry_and_removed_fact(self) -> None:
        """A changed admitted field (1 is not true) and a fact absent from B are both named."""
        a, _ = self.records()
        b = json.loads(json.dumps(a))
        b["admitted"][0]["value"] = 1
        a["admitted"][0]["value"] = True
        removed = b["excluded"].pop()
        diff = diff_records(a, b)
        kinds = {f.fact: f.change for f in diff.facts}
        assert kinds == {b["admitted"][0]["fact"]: "entry", removed["fact"]: "removed"}
        assert f"listed in A, absent from B:\n  {removed['fact']}" in diff.render()

    def test_order_is_a_difference(self) -> None:
        """Records listing the same facts in another order differ (bytes must be reproduced)."""
        a, _ = self.records()
        b = {**a, "excluded": list(reversed(a["excluded"]))}
        (change,) = diff_records(a, b).fields
        assert change.field == "excluded.order"
        assert change.b == [x["fact"] for x in reversed(a["excluded"])]

    def test_actor_fields_are_named(self) -> None:
        """A different actor shows per field (actor.roles), not as one opaque object."""
        a, _ = self.records()
        b = {**a, "actor": {**a["actor"], "roles": ["sales"]}}
        assert [c.field for c in diff_records(a, b).fields] == ["actor.roles"]
