"""Issue 30: replaying an audit record made before an erasure reports the difference as
erased, not as a changed decision (SPEC §21.5): the facts excluded as ``erased``, their
dependents and the experiences that used them, named with the erase event; exit 0. Any other
difference still makes the replay different."""

from __future__ import annotations

import json
from pathlib import Path

from erasure_helpers import gamma

ACTOR = '{"id": "alice", "tenant": "acme"}'
AT = "2026-03-01T12:00:00Z"


def lines() -> list[str]:
    base = {"actor": "writer", "tenant": "acme"}
    events = [
        {"type": "assert", "id": "e1", "ts": "2026-03-01T09:00:00Z", "fact": "F1",
         "key": "salary", "value": 5100, "subject": "bob"},
        {"type": "assert", "id": "e2", "ts": "2026-03-01T09:01:00Z", "fact": "F2",
         "key": "bonus", "value": 510, "depends_on": ["F1"]},
        {"type": "assert", "id": "e3", "ts": "2026-03-01T09:02:00Z", "fact": "F3",
         "key": "city", "value": "Lyon"},
        {"type": "experience", "id": "e4", "ts": "2026-03-01T09:03:00Z", "experience": "X1",
         "content": "paid the bonus", "uses": ["F2"]},
    ]
    return [json.dumps({**base, **event}) for event in events]


def store_with_record(tmp_path: Path) -> tuple[Path, Path]:
    store, log, record = tmp_path / "s.db", tmp_path / "log.jsonl", tmp_path / "before.json"
    log.write_text("\n".join(lines()) + "\n", encoding="utf-8")
    assert gamma("init", store, "--commit-values").code == 0
    assert gamma("append", store, log).code == 0
    made = gamma("resolve", store, "--actor", ACTOR, "--at", AT, "--audit", record)
    assert made.code == 0, made.err
    assert gamma("replay", store, "--expect", record).code == 0
    return store, record


def test_a_record_made_before_an_erasure_replays_as_erased(tmp_path: Path) -> None:
    store, record = store_with_record(tmp_path)
    erased = gamma("erase", store, "--tenant", "acme", "--fact", "F1", "--basis", "GDPR Art. 17",
                   "--actor", "writer")
    assert erased.code == 0, erased.err
    event = erased.json()["event"]
    run = gamma("replay", store, "--expect", record, "--json")
    assert run.code == 0, run.out
    result = run.json()
    assert result["ok"] is False  # not byte-identical: the record admitted F1 with its value
    assert result["head"]["ok"] and result["tree"]["ok"]  # the same log: the chain bytes stayed
    assert result["erased"] == {"events": [event], "facts": ["F1", "F2", "X1"], "only": True}
    text = gamma("replay", store, "--expect", record)
    assert text.code == 0 and text.out.startswith("identical but for erased values")
    # the erased value is nowhere (the erase event's random id may hold the digits "5100")
    assert event in text.out and "5100" not in text.out.replace(event, "")


def test_another_difference_beside_an_erasure_is_still_different(tmp_path: Path) -> None:
    store, record = store_with_record(tmp_path)
    gamma("erase", store, "--tenant", "acme", "--fact", "F1", "--basis", "GDPR Art. 17",
          "--actor", "writer")
    edited = json.loads(record.read_text(encoding="utf-8"))
    for item in edited["admitted"]:
        if item["fact"] == "F3":
            item["value"] = "Paris"  # a decision the log never made
    record.write_text(json.dumps(edited), encoding="utf-8")
    run = gamma("replay", store, "--expect", record, "--json")
    assert run.code == 1
    assert run.json()["erased"]["only"] is False


def test_an_unerased_replay_has_no_erased_field(tmp_path: Path) -> None:
    store, record = store_with_record(tmp_path)
    run = gamma("replay", store, "--expect", record, "--json")
    assert run.code == 0 and "erased" not in run.json()
