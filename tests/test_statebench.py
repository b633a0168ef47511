"""StateBench importer: timelines -> gamma conformance cases (gamma/statebench.py)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gamma.conformance.statebench import importer as sb
from gamma.conformance.statebench.expect import mentions_phrase
from gamma.conformance.statebench.importer import (
    StatebenchError,
    convert_timeline,
    convert_timeline_cases,
    import_file,
)

# shared/ lies beside the work tree (and beside CI's clone)
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "statebench" / "v1-dev.jsonl"

needs_sample = pytest.mark.skipif(not SAMPLE.exists(), reason="StateBench sample not present")

TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z$")
ENVELOPE = {"id", "type", "ts", "actor", "tenant"}
ASSERT_FIELDS = ENVELOPE | {
    "fact", "key", "value", "scope", "status", "authority", "kind", "priority",
    "visibility", "valid_from", "valid_until", "depends_on", "supersedes",
}
RETRACT_FIELDS = ENVELOPE | {"fact", "authority", "reason"}
EXPERIENCE_FIELDS = ENVELOPE | {"experience", "content", "uses", "applicability"}
CASE_FIELDS = {
    "id", "suite", "events", "log", "actor", "at", "question", "probe", "expect", "pool",
    "pair", "side", "axis", "decidable_by", "cell", "mode", "signature",
}


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


def sample_timelines() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line]
    return {row["id"]: row for row in rows}


def items(record: dict[str, Any], kind: str) -> list[dict[str, str]]:
    return [item for item in record["items"] if item["kind"] == kind]


def fact_events(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["fact"]: e for e in case["events"] if e["type"] == "assert"}


def check_design_section_3(case: dict[str, Any]) -> None:
    """The case's embedded log obeys DESIGN section 3 (own checks, independent of gamma)."""
    assert set(case) <= CASE_FIELDS
    assert case["suite"] == "imported"
    assert TS_RE.match(case["at"])
    seen_events: set[str] = set()
    facts: dict[str, str] = {}  # fact -> tenant
    last = ""
    for event in case["events"]:
        assert ENVELOPE <= set(event), event
        for name in ENVELOPE:
            assert isinstance(event[name], str) and event[name], (name, event)
        assert TS_RE.match(event["ts"]), event["ts"]
        assert event["ts"] >= last, "ts decreases"  # same fixed format: string order = time order
        last = event["ts"]
        assert event["id"] not in seen_events
        seen_events.add(event["id"])
        allowed = {"assert": ASSERT_FIELDS, "retract": RETRACT_FIELDS,
                   "experience": EXPERIENCE_FIELDS}[event["type"]]
        assert set(event) <= allowed, set(event) - allowed
        refs: list[str] = []
        if event["type"] == "assert":
            assert event["fact"] not in facts
            assert isinstance(event["key"], str) and event["key"]
            assert isinstance(event["value"], (str, int, bool))
            assert not isinstance(event["value"], float)
            refs = event.get("supersedes", []) + event.get("depends_on", [])
            if "visibility" in event:
                assert set(event["visibility"]) <= {"roles", "actors", "clearance"}
            for name in ("valid_from", "valid_until"):
                if name in event:
                    assert TS_RE.match(event[name])
        elif event["type"] == "retract":
            refs = [event["fact"]]
        else:
            refs = event["uses"]
        for ref in refs:
            assert facts.get(ref) == event["tenant"], f"{ref} is not an earlier fact of the tenant"
        if event["type"] == "assert":
            facts[event["fact"]] = event["tenant"]
    def walk(node: Any) -> None:
        assert not isinstance(node, float), node
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(case)


def gamma_check(case: dict[str, Any]) -> tuple[Any, Any]:
    """Parse the case's events with gamma's own validator and resolve them."""
    import gamma

    events = gamma.parse_events([json.dumps(e) for e in case["events"]])
    return events, gamma.resolve(events, case["actor"], case["at"])


BASE = "2026-03-02T09:"


def timeline(
    tid: str,
    track: str,
    events: list[dict[str, Any]],
    *,
    now: str = "2026-03-02T09:10:00",
    facts: tuple[dict[str, Any], ...] = (),
    working_set: tuple[dict[str, Any], ...] = (),
    org: str = "acme_corp",
) -> dict[str, Any]:
    """A v2-shaped timeline, as the statebench package's generators write them."""
    return {
        "id": tid,
        "version": "1.0",
        "domain": "sales",
        "track": track,
        "difficulty": "medium",
        "detection_mode": "explicit",
        "actors": {"user": {"id": "u1", "role": "manager", "org": org},
                   "assistant_role": "AI_Agent"},
        "initial_state": {
            "identity_role": {"user_name": "Alex", "authority": "manager"},
            "persistent_facts": list(facts),
            "working_set": list(working_set),
            "environment": {"now": now},
        },
        "events": events,
        "metadata": None,
    }


def turn(minute: int, text: str) -> dict[str, Any]:
    return {"ts": f"{BASE}{minute:02d}:00", "type": "conversation_turn", "speaker": "user",
            "text": text, "implicit_supersession": None}


def write(
    minute: int, fid: str, key: str, value: str, *, kind: str = "state_write",
    supersedes: str | None = None, authority: str = "manager", scope: str = "global",
    depends_on: tuple[str, ...] = (), layer: str = "persistent_facts",
) -> dict[str, Any]:
    return {
        "ts": f"{BASE}{minute:02d}:00",
        "type": kind,
        "writes": [{
            "id": fid, "layer": layer, "key": key, "value": value,
            "source": {"type": "user", "identity": None, "authority": authority},
            "scope": scope, "supersedes": supersedes, "depends_on": list(depends_on),
            "is_constraint": False, "constraint_type": None,
        }],
    }


def query(
    minute: int, *, must: tuple[Any, ...] = (), must_not: tuple[Any, ...] = (),
    expected: str | None = None, prompt: str = "What discount can I offer Northwind?",
) -> dict[str, Any]:
    truth: dict[str, Any] = {
        "decision": "see ground truth",
        "decision_type": "freeform",
        "must_mention": list(must),
        "must_not_mention": [
            {"phrase": p, "alternatives": [], "is_regex": False, "rationale": None,
             "kind": "superseded"} if isinstance(p, str) else p
            for p in must_not
        ],
        "allowed_sources": ["persistent_facts"],
        "reasoning": "because",
    }
    if expected is not None:
        truth["expected_applicability"] = expected
    return {"ts": f"{BASE}{minute:02d}:00", "type": "query", "prompt": prompt,
            "ground_truth": truth}


DISCOUNT = "Discount authority for Northwind is 22%"
REPLACED = "Discount authority for Northwind is 8%"


# --------------------------------------------------------------------------- #
# the real sample
# --------------------------------------------------------------------------- #


@needs_sample
def test_sample_imports_every_query(tmp_path: Path) -> None:
    """209 timelines become 248 cases, one per query (15 timelines have 3 or 4), in order;
    a timeline's several queries are ``<id>.q1``...; one unmapped line per case."""
    report = import_file(SAMPLE, tmp_path)
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line]
    ids = []
    for row in rows:
        n = sum(e["type"] == "query" for e in row["events"])
        ids += [row["id"]] if n <= 1 else [f"{row['id']}.q{k}" for k in range(1, n + 1)]
    assert len(rows) == 209 and len(ids) == 248
    assert (report.timelines, report.cases) == (209, 248)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(f"{i}.json" for i in ids)
    records = [json.loads(line) for line in (tmp_path / "unmapped.jsonl").read_text().splitlines()]
    assert [r["case"] for r in records] == ids
    assert report.unmapped == sum(len(r["items"]) for r in records)
    assert dict(report.unmapped_by_kind) == dict(
        Counter(item["kind"] for r in records for item in r["items"])
    )
    assert "other_query" not in dict(report.unmapped_by_kind)
    for tid in ids[:5]:
        case = json.loads((tmp_path / f"{tid}.json").read_text())
        assert case["id"] == tid and case["suite"] == "imported"


@needs_sample
def test_sample_bytes_are_deterministic(tmp_path: Path) -> None:
    """Two imports write identical bytes: sorted keys, UTF-8 unescaped, one trailing newline."""
    first, second = tmp_path / "a", tmp_path / "b"
    import_file(SAMPLE, first)
    import_file(str(SAMPLE), str(second))
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        data = (first / name).read_bytes()
        assert data == (second / name).read_bytes(), name
        assert data.endswith(b"\n") and not data.endswith(b"\n\n")
    raw = (first / "S9-000819.json").read_text(encoding="utf-8")
    case = json.loads(raw)
    assert list(case) == sorted(case)
    assert raw == json.dumps(case, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
    lines = (first / "unmapped.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(line == json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False,
                                  separators=(",", ":")) for line in lines)


def test_non_ascii_is_written_unescaped(tmp_path: Path) -> None:
    """ensure_ascii=False: a value with non-ASCII text is stored as UTF-8, not as \\u escapes."""
    row = timeline("T-€", "supersession", [write(2, "F-1", "price", "Preis: 22 € netto"),
                                            query(4, must=("22 €",))])
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(row) + "\n", encoding="utf-8")
    import_file(src, tmp_path / "out")
    data = (tmp_path / "out" / "T-€.json").read_bytes()
    assert "Preis: 22 € netto".encode() in data and b"\\u20ac" not in data
    assert json.loads(data)["expect"]["admitted"] == ["F-1"]


@needs_sample
def test_sample_cases_follow_design_section_3() -> None:
    """Every log has full envelopes, UTC ts in order, earlier same-tenant refs and no floats."""
    for row in sample_timelines().values():
        case, record = convert_timeline(row)
        check_design_section_3(case)
        assert record["timeline"] == row["id"] == case["id"]
        assert set(case["expect"]) == {"admitted", "excluded", "experiences", "ignored", "exact"}
        assert case["expect"]["exact"] is False


@needs_sample
def test_sample_cases_are_valid_gamma_logs_and_expectations_hold() -> None:
    """gamma.parse_events accepts every case and gamma.resolve meets every listed expectation."""
    checked = Counter()
    for row in sample_timelines().values():
        case, _ = convert_timeline(row)
        _, resolution = gamma_check(case)
        admitted = {a.fact for a in resolution.admitted}
        excluded = {x.fact: {r.code for r in x.reasons} for x in resolution.excluded}
        for fact in case["expect"]["admitted"]:
            assert fact in admitted, (case["id"], fact, excluded.get(fact))
            checked["admitted"] += 1
        for fact, codes in case["expect"]["excluded"].items():
            assert set(codes) <= excluded.get(fact, set()), (case["id"], fact, codes)
            checked["excluded"] += 1
    # the sample exercises both kinds of expectation
    assert checked["admitted"] > 150 and checked["excluded"] > 100


@needs_sample
def test_sample_supersession_chain_S1_000013() -> None:
    """Explicit supersedes by key become references; only the unsuperseded head is admitted."""
    case, record = convert_timeline(sample_timelines()["S1-000013"])
    facts = fact_events(case)
    assert list(facts) == ["F-PURCHA-001", "F-PURCHA-002", "F-PURCHA-003", "F-PURCHA-004"]
    first = facts["F-PURCHA-001"]
    assert first == {
        "id": "ev1", "type": "assert", "ts": "2025-12-07T11:03:00Z", "actor": "user",
        "tenant": "innovation_labs", "fact": "F-PURCHA-001", "key": "purchase_office_equipment",
        "value": "approved purchase of Office Equipment for $10000", "authority": "peer",
    }
    # "supersedes": "purchase_office_equipment_v2" (a key) -> the fact with that key
    assert facts["F-PURCHA-003"]["supersedes"] == ["F-PURCHA-002"]
    assert facts["F-PURCHA-004"]["supersedes"] == ["F-PURCHA-003"]
    assert facts["F-PURCHA-004"]["ts"] == "2025-12-07T13:11:00Z"
    assert case["at"] == "2025-12-07T13:17:30Z"
    assert case["question"] == "Can I submit the PO for Office Equipment?"
    assert case["actor"] == {"id": "u1", "tenant": "innovation_labs", "roles": ["Vendor Manager"]}
    # must_mention "cancelled" is in 002, 003, 004 but only 004 is live
    assert case["expect"]["admitted"] == ["F-PURCHA-004"]
    # must_not_mention "$10000", "approved" -> 001, superseded by 002
    assert case["expect"]["excluded"] == {"F-PURCHA-001": ["superseded"]}
    assert case["probe"] == ["purchase_office_equipment", "purchase_office_equipment_v4"]
    assert case["pool"]["gold"] == ["cancelled"]
    # 003's value equals the live 004's, 002's contains gold: neither is drift
    assert case["pool"]["drift"] == [
        "$10000", "approved", "approved purchase of Office Equipment for $10000",
    ]
    assert "axis" not in case and "cell" not in case and "pair" not in case
    assert [i["path"] for i in items(record, "conversation_turn")] == [
        "events[0]", "events[3]", "events[5]", "events[7]",
    ]
    assert record["track"] == "supersession" and record["query"] == "events[8]"


@needs_sample
def test_sample_restricted_S4_000372() -> None:
    """[RESTRICTED: ...] is stripped into visibility.clearance; the label goes to unmapped."""
    case, record = convert_timeline(sample_timelines()["S4-000372"])
    facts = fact_events(case)
    restricted = facts["F-PF-RESTR-0"]
    assert restricted["value"] == "Board approved strategic pricing floor of $30k for Globex"
    assert restricted["visibility"] == {"clearance": sb.RESTRICTED_CLEARANCE}
    assert restricted["authority"] == "system" and restricted["tenant"] == "acme_corp"
    assert "visibility" not in facts["F-PF-SHARED-1"]
    assert case["actor"] == {"id": "sales_rep", "tenant": "acme_corp", "roles": ["Sales Rep"]}
    assert case["expect"]["excluded"] == {
        "F-PF-RESTR-0": ["access_denied"],
        "F-PF-RESTR-1": ["access_denied"],
        "F-PF-RESTR-2": ["access_denied"],
    }
    assert case["expect"]["admitted"] == ["F-PF-SHARED-1"]  # "$50k"
    labels = items(record, "restriction_label")
    assert [i["detail"] for i in labels] == ["Strategic pricing and M&A info restricted to VP+"] * 3
    # "standard pricing" is in no fact value: only prose carries it
    assert items(record, "must_mention_not_in_facts") == [{
        "kind": "must_mention_not_in_facts", "detail": "standard pricing",
        "path": "events[1].ground_truth.must_mention[0]",
    }]


@needs_sample
def test_sample_draft_scope_S7_000672() -> None:
    """[SCOPE: draft document] working-set items become facts out of the actor's scope."""
    case, record = convert_timeline(sample_timelines()["S7-000672"])
    facts = fact_events(case)
    draft = facts["working_set.draft_terms"]
    assert draft["scope"] == "draft_document"
    assert draft["key"] == "working_set.draft_terms"
    assert draft["value"].startswith("Draft: 24-month contract; Draft: $500K annual value")
    assert facts["F-PF-GLOBAL-1"]["value"] == "In negotiation" and "scope" not in facts[
        "F-PF-GLOBAL-1"]
    # "24-month", "$500K", "unlimited users" all sit in the draft item
    assert case["expect"]["excluded"] == {"working_set.draft_terms": ["out_of_scope"]}
    assert case["expect"]["admitted"] == ["F-PF-GLOBAL-1", "F-PF-GLOBAL-2"]
    assert [i["detail"] for i in items(record, "must_not_mention_not_in_facts")] == ["agreed"]


@needs_sample
def test_sample_repair_renames_duplicate_ids_S9_000819() -> None:
    """Writes all called W-AUTO get distinct ids; a live fact quoting a banned value is reported."""
    case, record = convert_timeline(sample_timelines()["S9-000819"])
    facts = fact_events(case)
    assert list(facts) == ["F-PF-0011", "W-AUTO#1", "W-AUTO#2", "W-AUTO#3"]
    assert facts["W-AUTO#2"]["supersedes"] == ["F-PF-0011"]  # by key "available_budget"
    assert facts["W-AUTO#3"]["supersedes"] == ["W-AUTO#1"]  # by key "derived_decision"
    assert case["expect"]["excluded"] == {"F-PF-0011": ["superseded"], "W-AUTO#1": ["superseded"]}
    assert case["expect"]["admitted"] == ["W-AUTO#2"]
    live = items(record, "must_not_mention_live_fact")
    assert {i["detail"] for i in live} == {"W-AUTO#3"}  # "[INVALIDATED ...] $200,000 ..." is live


@needs_sample
def test_sample_environment_update_S5_000439() -> None:
    """Environment entries are facts stamped at now; a later write of the key supersedes them."""
    case, _ = convert_timeline(sample_timelines()["S5-000439"])
    facts = fact_events(case)
    initial = facts["environment.deadline"]
    assert initial["ts"] == "2025-11-29T09:00:00Z" and initial["authority"] == "system"
    assert initial["key"] == "environment.deadline"
    update = [f for f in facts.values() if f["fact"] != "environment.deadline"]
    assert [u["key"] for u in update] == ["environment.deadline"]
    assert case["expect"]["excluded"] == {"environment.deadline": ["superseded"]}
    assert case["expect"]["admitted"] == [update[0]["fact"]]


@needs_sample
def test_sample_multi_query_one_case_each_S10_000966() -> None:
    """Each query is its own case, at its own time, over the events before it."""
    row = sample_timelines()["S10-000966"]
    converted = convert_timeline_cases(row)
    assert [c["id"] for c, _ in converted] == [f"S10-000966.q{k}" for k in (1, 2, 3)]
    assert [c["question"] for c, _ in converted] == [
        "What was the root cause of the customer's issue?",
        "Was L1 or L2 support correct in their diagnosis?",
        "What business impact did this cause?",
    ]
    assert [c["at"] for c, _ in converted] == [
        "2025-12-17T21:10:00Z", "2025-12-17T21:25:00Z", "2025-12-17T21:45:00Z"]
    assert [r["query"] for _, r in converted] == ["events[18]", "events[19]", "events[20]"]
    assert all(not items(r, "other_query") for _, r in converted)
    for case, _ in converted:
        assert all(e["ts"] <= case["at"] for e in case["events"])
    assert convert_timeline(row)[0]["question"] == converted[-1][0]["question"]


@needs_sample
def test_sample_initial_facts_are_ordered_by_ts_ENT_P_001178() -> None:
    """Initial facts listed out of time order are emitted in time order, keeping real stamps."""
    case, record = convert_timeline(sample_timelines()["ENT-P-001178"])
    facts = fact_events(case)
    assert [(f["fact"], f["ts"]) for f in facts.values()] == [
        ("F-ATK-001", "2025-12-06T16:00:00Z"),
        ("F-ATK-000", "2025-12-07T16:00:00Z"),
    ]
    # the other tenant's data exists only in prose
    assert len(items(record, "must_not_mention_not_in_facts")) == 5
    assert case["expect"]["excluded"] == {} and "probe" not in case


# --------------------------------------------------------------------------- #
# v2-style timelines (cf_* and applicability tracks)
# --------------------------------------------------------------------------- #


def cf_pair(
    axis: str, prefix: str, governed: dict[str, Any], plain: dict[str, Any], **kw: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two sides of one v2 pair: ids <prefix>-POS-0007 and <prefix>-CF-0008."""
    opening = turn(0, "I need to sort out the vendor discount authority.")
    pos = timeline(f"{prefix}-POS-0007", f"cf_{axis}", [opening, plain, query(5, must=("22%",))],
                   **kw)
    cf = timeline(f"{prefix}-CF-0008", f"cf_{axis}",
                  [opening, governed, query(5, must_not=("22%",))], **kw)
    return pos, cf


def test_cf_access_control_pair() -> None:
    """cf_* track -> axis, decidable_by, side and a shared pair id; RESTRICTED -> access_denied."""
    plain = write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT)
    governed = write(2, "F-CF-001", "vendor_discount_authority",
                     f"[RESTRICTED: executive] {DISCOUNT}")
    pos, cf = cf_pair("access_control", "ACCESS", governed, plain)
    pos_case, pos_rec = convert_timeline(pos)
    cf_case, cf_rec = convert_timeline(cf)
    assert (pos_case["axis"], pos_case["decidable_by"], pos_case["side"]) == (
        "access_control", "engine", "positive")
    assert (cf_case["axis"], cf_case["side"]) == ("access_control", "counterfactual")
    assert pos_case["pair"] == cf_case["pair"] == "ACCESS-0007"
    assert pos_case["expect"]["admitted"] == ["F-CF-001"] and pos_case["expect"]["excluded"] == {}
    assert cf_case["expect"]["excluded"] == {"F-CF-001": ["access_denied"]}
    assert fact_events(cf_case)["F-CF-001"]["value"] == DISCOUNT
    assert pos_case["pool"] == {"gold": ["22%"]}
    assert "pool" not in cf_case  # drift only, no gold answer: nothing to grade
    assert items(cf_rec, "restriction_label")[0]["detail"] == "executive"
    for case in (pos_case, cf_case):
        check_design_section_3(case)
        _, resolution = gamma_check(case)
    assert [x.fact for x in resolution.excluded] == ["F-CF-001"]


def test_cf_scope_binding_draft_status() -> None:
    """StateBench scope "draft" becomes gamma status draft (scope stays global)."""
    governed = write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT, scope="draft")
    plain = write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT)
    _, cf = cf_pair("scope_binding", "SCOPE_", governed, plain)
    case, _ = convert_timeline(cf)
    fact = fact_events(case)["F-CF-001"]
    assert fact["status"] == "draft" and "scope" not in fact
    assert case["expect"]["excluded"] == {"F-CF-001": ["draft"]}
    assert case["decidable_by"] == "engine" and case["pair"] == "SCOPE_-0007"
    hypothetical = copy.deepcopy(cf)
    hypothetical["events"][1]["writes"][0]["scope"] = "hypothetical"
    case, _ = convert_timeline(hypothetical)
    assert fact_events(case)["F-CF-001"]["status"] == "hypothetical"
    assert case["expect"]["excluded"] == {"F-CF-001": ["hypothetical"]}
    task = copy.deepcopy(cf)
    task["events"][1]["writes"][0]["scope"] = "task"
    case, _ = convert_timeline(task)
    assert fact_events(case)["F-CF-001"]["scope"] == "task"
    assert case["expect"]["excluded"] == {"F-CF-001": ["out_of_scope"]}
    gamma_check(case)


def test_cf_actor_isolation_other_tenant() -> None:
    """[RESTRICTED: tenant_x] puts the fact in tenant x: tenant_isolation, nothing else."""
    governed = write(2, "F-CF-001", "vendor_discount_authority",
                     f"[RESTRICTED: tenant_zenith] {DISCOUNT}")
    plain = write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT)
    _, cf = cf_pair("actor_isolation", "ACTOR_", governed, plain)
    case, record = convert_timeline(cf)
    fact = fact_events(case)["F-CF-001"]
    assert fact["tenant"] == "tenant_zenith" and "visibility" not in fact
    assert case["actor"]["tenant"] == "acme_corp"
    assert case["expect"]["excluded"] == {"F-CF-001": ["tenant_isolation"]}
    assert items(record, "restriction_label") == []
    _, resolution = gamma_check(case)
    assert resolution.excluded == ()  # another tenant's fact is not listed
    assert case["expect"]["excluded"] == {"F-CF-001": ["tenant_isolation"]}


def test_cf_temporal_validity_and_probe_time() -> None:
    """(valid through D) -> valid_until D+1 00:00Z; the probe time is the later of query and now."""
    governed = write(2, "F-CF-001", "vendor_discount_authority",
                     f"{DISCOUNT} (valid through 2026-01-31)")
    plain = write(2, "F-CF-001", "vendor_discount_authority",
                  f"{DISCOUNT} (valid through 2026-04-01)")
    pos, cf = cf_pair("temporal_validity", "TEMPOR", governed, plain, now="2026-03-03T09:00:00")
    pos_case, _ = convert_timeline(pos)
    cf_case, _ = convert_timeline(cf)
    assert fact_events(cf_case)["F-CF-001"]["valid_until"] == "2026-02-01T00:00:00Z"
    assert fact_events(pos_case)["F-CF-001"]["valid_until"] == "2026-04-02T00:00:00Z"
    assert cf_case["at"] == "2026-03-03T09:00:00Z"  # environment.now, later than the query
    assert cf_case["expect"]["excluded"] == {"F-CF-001": ["expired"]}
    assert pos_case["expect"]["admitted"] == ["F-CF-001"]
    assert pos_case["decidable_by"] == "model"
    gamma_check(cf_case)


def test_cf_supersession_by_fact_id_and_decoy() -> None:
    """supersedes naming a fact id links that fact; the positive side's decoy supersedes nothing."""
    original = write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT)
    replace = write(3, "F-CF-002", "vendor_discount_authority", REPLACED, kind="supersession",
                    supersedes="F-CF-001")
    decoy = write(3, "F-CF-DECOY", "vendor_discount_authority_contact",
                  "Primary contact is now Dana Reyes", kind="supersession")
    pos = timeline("SUPERS-POS-0001", "cf_supersession",
                   [original, decoy, query(5, must=("22%",))])
    cf = timeline("SUPERS-CF-0002", "cf_supersession",
                  [original, replace, query(5, must=("8%",), must_not=("22%",))])
    pos_case, _ = convert_timeline(pos)
    cf_case, _ = convert_timeline(cf)
    assert "supersedes" not in fact_events(pos_case)["F-CF-DECOY"]
    assert pos_case["expect"]["admitted"] == ["F-CF-001"]
    assert fact_events(cf_case)["F-CF-002"]["supersedes"] == ["F-CF-001"]
    assert cf_case["expect"] == {
        "admitted": ["F-CF-002"], "excluded": {"F-CF-001": ["superseded"]},
        "experiences": {}, "ignored": {}, "exact": False,
    }
    assert cf_case["pool"] == {"gold": ["8%"], "drift": ["22%", DISCOUNT]}
    assert pos_case["pair"] == cf_case["pair"] == "SUPERS-0001"


def test_cf_dependency_validity() -> None:
    """depends_on becomes a reference; a superseded premise invalidates its dependent."""
    events = [
        write(2, "F-CF-PREMISE", "vendor_discount_authority_basis", "Basis rate confirmed at 4%",
              authority="system"),
        write(4, "F-CF-001", "vendor_discount_authority", DISCOUNT, depends_on=("F-CF-PREMISE",)),
        write(6, "F-CF-PREMISE-2", "vendor_discount_authority_basis", "Basis rate corrected to 9%",
              kind="supersession", supersedes="F-CF-PREMISE", authority="system"),
        query(8, must_not=("22%",)),
    ]
    case, _ = convert_timeline(timeline("DEPEND-CF-0002", "cf_dependency_validity", events))
    assert fact_events(case)["F-CF-001"]["depends_on"] == ["F-CF-PREMISE"]
    assert case["expect"]["excluded"] == {"F-CF-001": ["dependency_invalidated"]}
    _, resolution = gamma_check(case)
    assert {x.fact for x in resolution.excluded} == {"F-CF-001", "F-CF-PREMISE"}


def test_derivation_told_only_in_prose_is_unmapped() -> None:
    """StateBench states no derivation formally (a dependent's value is prose): the log keeps
    ``depends_on`` and no ``derivation``, so Γ under ``recompute`` cannot recompute it, and
    each dependent fact is listed once as ``derivation_prose``; facts without inputs are not."""
    events = [
        write(2, "F-CF-PREMISE", "vendor_discount_authority_basis", "Basis rate confirmed at 4%",
              authority="system"),
        write(4, "F-CF-001", "vendor_discount_authority", DISCOUNT, depends_on=("F-CF-PREMISE",)),
        query(8, must=("22%",)),
    ]
    case, record = convert_timeline(timeline("DEPEND-CF-0003", "cf_dependency_validity", events))
    assert "derivation" not in fact_events(case)["F-CF-001"]
    assert items(record, "derivation_prose") == [
        {"kind": "derivation_prose", "path": "events[1].writes[0].value", "detail": "F-CF-001"}]


def test_cf_commitment_status_cancellation_is_prose() -> None:
    """A cancellation said only in conversation yields no exclusion, and is reported."""
    events = [
        write(2, "F-CF-001", "vendor_discount_authority", DISCOUNT),
        turn(3, "Cancel that — it is withdrawn and no longer applies."),
        query(5, must_not=("22%",)),
    ]
    case, record = convert_timeline(timeline("COMMIT-CF-0002", "cf_commitment_status", events))
    assert case["expect"]["excluded"] == {} and case["expect"]["admitted"] == []
    assert items(record, "must_not_mention_live_fact") == [{
        "kind": "must_not_mention_live_fact", "detail": "F-CF-001",
        "path": "events[2].ground_truth.must_not_mention[0]",
    }]
    assert items(record, "conversation_turn") == [
        {"kind": "conversation_turn", "path": "events[1]"}]


def appl(tid: str, events: list[dict[str, Any]], q: dict[str, Any]) -> dict[str, Any]:
    experience = turn(1, "Last time we handled vendor discount the same way, though the figure "
                         "has moved since.")
    return timeline(tid, "applicability", [experience, *events, q], now="2026-03-03T09:00:00")


def test_applicability_valid_row_sets_cell_and_verdict() -> None:
    """Valid state: the experience's applicability is the only one giving the expected verdict."""
    base = write(2, "F-APPL-001", "vendor_discount_authority", DISCOUNT)
    for expected, applicability in (("KEEP", "applicable"), ("ADAPT", "adaptable"),
                                    ("REJECT", "unusable")):
        case, record = convert_timeline(appl("APPL-0001", [base],
                                             query(4, must=("22%",), expected=expected)))
        experience = case["events"][-1]
        assert experience["type"] == "experience" and experience["uses"] == ["F-APPL-001"]
        assert experience["applicability"] == applicability
        assert experience["content"].startswith("Last time we handled vendor discount")
        assert case["cell"] == f"valid/{applicability}"
        assert case["expect"]["experiences"] == {"EXP-1": expected}
        assert "axis" not in case
        assert items(record, "experience_applicability")[0]["detail"] == applicability
        _, resolution = gamma_check(case)
        assert [(e.experience, e.verdict) for e in resolution.experiences] == [("EXP-1", expected)]


@pytest.mark.parametrize(
    ("name", "events", "must", "expected", "code"),
    [
        ("superseded", [write(6, "F-APPL-002", "vendor_discount_authority", REPLACED,
                              kind="supersession", supersedes="F-APPL-001")],
         ("8%",), "ADAPT", "superseded"),
        ("outranked", [write(6, "F-APPL-POLICY", "vendor_discount_authority", REPLACED,
                             authority="policy")], ("8%",), "ADAPT", "superseded"),
    ],
)
def test_applicability_substituting_cells(
    name: str, events: list[dict[str, Any]], must: tuple[str, ...], expected: str, code: str
) -> None:
    """A substituted used fact with a live replacement gives ADAPT whatever the prose said."""
    base = write(2, "F-APPL-001", "vendor_discount_authority", DISCOUNT)
    case, record = convert_timeline(
        appl("APPL-0002", [base, *events],
             query(8, must=must, must_not=("22%",), expected=expected))
    )
    experience = case["events"][-1]
    assert experience["uses"] == ["F-APPL-001"] and "applicability" not in experience
    assert case["expect"]["excluded"] == {"F-APPL-001": [code]}
    assert case["expect"]["experiences"] == {"EXP-1": "ADAPT"}
    assert "cell" not in case and items(record, "cell")  # experience side only in prose
    _, resolution = gamma_check(case)
    assert [(e.experience, e.verdict) for e in resolution.experiences] == [("EXP-1", "ADAPT")]


@pytest.mark.parametrize(
    ("value", "scope", "code"),
    [
        (f"[RESTRICTED: executive] {DISCOUNT}", "global", "access_denied"),
        (DISCOUNT, "draft", "draft"),
        (f"{DISCOUNT} (valid through 2026-01-31)", "global", "expired"),
    ],
)
def test_applicability_withdrawing_cells(value: str, scope: str, code: str) -> None:
    """A withdrawn used fact gives REJECT; the expectation is kept because it matches."""
    base = write(2, "F-APPL-001", "vendor_discount_authority", value, scope=scope)
    case, _ = convert_timeline(appl("APPL-0003", [base], query(4, must_not=("22%",),
                                                                expected="REJECT")))
    assert case["expect"]["excluded"] == {"F-APPL-001": [code]}
    assert case["expect"]["experiences"] == {"EXP-1": "REJECT"}
    gamma_check(case)


def test_applicability_conflict_is_reported_not_expected() -> None:
    """When gamma's table cannot give the expected verdict, no experience expectation is written."""
    base = write(2, "F-APPL-001", "vendor_discount_authority", DISCOUNT, scope="draft")
    case, record = convert_timeline(appl("APPL-0004", [base], query(4, expected="ADAPT")))
    assert case["expect"]["experiences"] == {}
    assert items(record, "expected_applicability_conflict")[0]["detail"] == "ADAPT vs REJECT"
    with pytest.raises(StatebenchError) as info:
        convert_timeline(appl("APPL-0005", [base], query(4, expected="MAYBE")))
    assert info.value.field == "events[2].ground_truth.expected_applicability"


def test_mention_requirements_alternatives_and_regex() -> None:
    """Alternatives are gold aliases and find suppliers; regex phrases are reported, not matched."""
    events = [
        write(2, "F-1", "vendor_discount_authority", "Northwind may get twenty-two percent"),
        query(4, must=({"phrase": "22%", "alternatives": ["twenty-two percent"],
                        "is_regex": False, "rationale": None, "kind": "other"},
                       {"phrase": r"\d+%", "alternatives": [], "is_regex": True,
                        "rationale": None, "kind": "other"})),
    ]
    case, record = convert_timeline(timeline("T-1", "supersession", events))
    assert case["expect"]["admitted"] == ["F-1"]
    assert case["pool"] == {"gold": ["22%", "twenty-two percent"]}
    assert items(record, "regex_phrase")[0]["detail"] == r"\d+%"


def test_must_mention_in_two_live_facts_is_ambiguous() -> None:
    """A gold phrase two live facts carry names neither as required; only-excluded is reported."""
    events = [
        write(2, "F-1", "north", "Northwind discount is 22%"),
        write(3, "F-2", "south", "Southwind discount is 22%"),
        write(4, "F-3", "east", "Eastwind is on hold", scope="draft"),
        query(5, must=("22%", "on hold")),
    ]
    case, record = convert_timeline(timeline("T-7", "supersession", events))
    assert case["expect"]["admitted"] == []
    assert items(record, "must_mention_ambiguous")[0]["detail"] == "F-1 | F-2"
    assert items(record, "must_mention_only_excluded")[0]["detail"] == "on hold"


def test_phrase_matching_is_whole_word() -> None:
    """'10%' does not match inside '110%'; case is ignored; '$50k' matches before '/year'."""
    assert mentions_phrase("volume discount 10%", "10%")
    assert not mentions_phrase("volume discount 110%", "10%")
    assert mentions_phrase("Standard pricing is $50k/year", "$50K")
    assert not mentions_phrase("ORD-44710", "ORD-4471")
    assert not mentions_phrase("anything", "  ")


def test_supersession_below_authority_is_not_expected() -> None:
    """StateBench's supersession of a higher-authority fact is ignored by gamma: no expectation."""
    events = [
        write(2, "F-1", "limit", "Limit is 22%", authority="executive"),
        write(3, "F-2", "limit_v2", "Limit is 8%", kind="supersession", supersedes="limit",
              authority="peer"),
        query(4, must=("8%",), must_not=("22%",)),
    ]
    case, record = convert_timeline(timeline("T-2", "supersession", events))
    assert fact_events(case)["F-2"]["supersedes"] == ["F-1"]
    assert case["expect"]["excluded"] == {}
    assert items(record, "supersession_below_authority")[0]["detail"] == "F-1"
    assert items(record, "must_not_mention_live_fact")[0]["detail"] == "F-1"
    _, resolution = gamma_check(case)
    assert [(i.event, i.code) for i in resolution.ignored] == [("ev2", "insufficient_authority")]


def test_same_key_lower_authority_is_outranked() -> None:
    """A later lower-authority value of the same key loses on precedence: outranked."""
    events = [
        write(2, "F-1", "limit", "Limit is 15%", authority="policy"),
        write(3, "F-2", "limit", "Limit is 25%", authority="peer"),
        query(4, must=("15%",), must_not=("25%",)),
    ]
    case, _ = convert_timeline(timeline("T-3", "authority_conflict", events))
    assert case["expect"]["admitted"] == ["F-1"]
    assert case["expect"]["excluded"] == {"F-2": ["outranked"]}
    _, resolution = gamma_check(case)
    assert {x.fact: [r.code for r in x.reasons] for x in resolution.excluded} == {
        "F-2": ["outranked"]}


def test_invalid_initial_fact_is_retracted_and_refs_unresolved_reported() -> None:
    """is_valid false -> a retract after the assert; a dangling supersedes is dropped and listed."""
    fact = {"id": "F-0", "key": "plan", "value": "Plan A", "ts": "2026-03-02T08:00:00",
            "source": {"type": "system", "identity": None, "authority": "system"},
            "supersedes": None, "superseded_by": None, "is_valid": False, "scope": "global",
            "depends_on": [], "derived_facts": [], "is_constraint": True,
            "constraint_type": "budget"}
    events = [write(2, "F-1", "plan_v2", "Plan B", supersedes="nowhere"),
              query(4, must=("Plan B",), must_not=("Plan A",))]
    case, record = convert_timeline(timeline("T-4", "supersession", events, facts=(fact,)))
    first, retract, second = case["events"]
    assert first["kind"] == "constraint" and first["authority"] == "system"
    assert retract["type"] == "retract" and retract["fact"] == "F-0"
    assert retract["authority"] == "system" and retract["ts"] == first["ts"]
    assert "supersedes" not in second
    assert items(record, "unresolved_reference")[0]["detail"] == "nowhere"
    assert case["expect"]["excluded"] == {"F-0": ["retracted"]}
    assert case["expect"]["admitted"] == ["F-1"]
    gamma_check(case)


def test_timestamps_offsets_and_order() -> None:
    """Offsets are converted to UTC; a write stamped before the previous event is raised to it."""
    events = [
        write(5, "F-1", "a", "one"),
        write(3, "F-2", "b", "two"),  # earlier than F-1
        query(9),
    ]
    events[0]["ts"] = "2026-03-02T11:05:00+02:00"  # 09:05Z
    case, _ = convert_timeline(timeline("T-5", "supersession", events))
    facts = fact_events(case)
    assert facts["F-1"]["ts"] == "2026-03-02T09:05:00Z"
    assert facts["F-2"]["ts"] == "2026-03-02T09:05:00Z"
    assert case["at"] == "2026-03-02T09:10:00Z"  # now (09:10) is later than the query (09:09)
    check_design_section_3(case)


def test_timeline_without_query_still_converts() -> None:
    """No query: the case has no question, at is the last time known, and it is reported."""
    case, record = convert_timeline(timeline("T-6", "supersession", [write(2, "F-1", "a", "x")]))
    assert "question" not in case and case["at"] == "2026-03-02T09:10:00Z"
    assert record["query"] is None and items(record, "no_query")


# --------------------------------------------------------------------------- #
# malformed input
# --------------------------------------------------------------------------- #


def good_line(tid: str = "T-1") -> str:
    return json.dumps(timeline(tid, "supersession", [write(2, "F-1", "a", "x"), query(4)]))


def run_import(tmp_path: Path, lines: list[str]) -> StatebenchError:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(StatebenchError) as info:
        import_file(src, out)
    assert not out.exists(), "nothing is written when the input is malformed"
    assert isinstance(info.value, ValueError)
    return info.value


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    """A line that is not JSON fails with its 1-based physical line number (blank lines count)."""
    err = run_import(tmp_path, [good_line("A"), "", '{"id": "B", '])
    assert err.line == 3 and err.field is None
    assert "line 3" in str(err)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t["actors"]["user"].pop("org"), "actors.user.org"),
        (lambda t: t.pop("track"), "track"),
        (lambda t: t["events"][0]["writes"][0].pop("key"), "events[0].writes[0].key"),
        (lambda t: t["events"][0]["writes"][0].update(value=2.5), "events[0].writes[0].value"),
        (lambda t: t["events"][0].update(ts="yesterday"), "events[0].ts"),
        (lambda t: t["events"][0].update(type="memo"), "events[0].type"),
        (lambda t: t["events"][1].pop("ground_truth"), "events[1].ground_truth"),
        (lambda t: t["events"][0]["writes"][0].update(layer="cache"), "events[0].writes[0].layer"),
        (lambda t: t.update(id="../escape"), "id"),
        (lambda t: t["initial_state"].update(persistent_facts=[{"id": "F", "key": "k",
                                                                "ts": "2026-03-02T09:00:00"}]),
         "initial_state.persistent_facts[0].value"),
    ],
)
def test_malformed_timeline_names_line_and_field(tmp_path: Path, mutate: Any, field: str) -> None:
    """A missing or ill-typed field fails naming the line and the dotted field path."""
    bad = json.loads(good_line("B"))
    mutate(bad)
    err = run_import(tmp_path, [good_line("A"), json.dumps(bad)])
    assert (err.line, err.field) == (2, field)
    assert f"field {field!r}" in str(err)


@pytest.mark.parametrize(
    "text",
    ['{"id": "A", "id": "B"}', '{"id": NaN}', "[1, 2]"],
)
def test_duplicate_keys_nan_and_non_objects_are_refused(tmp_path: Path, text: str) -> None:
    """Duplicate JSON keys, NaN and non-object lines are malformed lines."""
    err = run_import(tmp_path, [text])
    assert err.line == 1


def test_duplicate_timeline_ids_are_refused(tmp_path: Path) -> None:
    """Two timelines with one id would overwrite one case file: refused on the second line."""
    err = run_import(tmp_path, [good_line("A"), good_line("A")])
    assert (err.line, err.field) == (2, "id")


def test_non_utf8_input_names_the_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 fail with the line they are on."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(good_line("A").encode() + b"\n" + b'{"id": "\xff"}\n')
    with pytest.raises(StatebenchError) as info:
        import_file(src, tmp_path / "out")
    assert info.value.line == 2


def test_convert_timeline_error_has_no_line() -> None:
    """Outside a file the error carries the field and line None."""
    bad = json.loads(good_line())
    del bad["events"]
    with pytest.raises(StatebenchError) as info:
        convert_timeline(bad)
    assert (info.value.line, info.value.field) == (None, "events")
