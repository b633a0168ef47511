"""``gamma resolve --audit``, ``gamma replay`` and ``gamma audit diff`` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gamma.cli import main

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "examples" / "acme.jsonl"
ALICE = ROOT / "fixtures" / "examples" / "alice.json"
AT = "2026-03-02T10:00:00Z"
GAMMA = [sys.executable, "-c", "from gamma.cli import main; main()"]
STRICT = ROOT / "policies" / "strict.toml"
MULTIVALUE = ROOT / "policies" / "multivalue.toml"


def gamma(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def audit(capsys: pytest.CaptureFixture[str], path: Path, *extra: object, log: Path = LOG,
          at: str = AT) -> Path:  # fmt: skip
    code, _, err = gamma(capsys, "resolve", log, "--actor", ALICE, "--at", at, "--audit", path,
                         "--format", "json", *extra)  # fmt: skip
    assert code == 0, err
    return path


def edit(path: Path, change: object) -> None:
    record = json.loads(path.read_text())
    change(record)  # type: ignore[operator]
    path.write_text(json.dumps(record, indent=1))


class TestReplay:
    def test_identical(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A record written today replays identically: exit 0 and says so."""
        record = audit(capsys, tmp_path / "a.json")
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 0
        assert out.startswith("identical: replayed 33 events, head ")

    def test_identical_in_subprocesses_with_other_hash_seeds(self, tmp_path: Path) -> None:
        """Written under one PYTHONHASHSEED, replayed under another: byte-identical, exit 0."""
        records = []
        for seed in ("1", "2"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            path = tmp_path / f"seed{seed}.json"
            subprocess.run(
                [*GAMMA, "resolve", str(LOG), "--actor", str(ALICE),
                 "--at", AT, "--audit", str(path)],
                env=env, check=True, capture_output=True,
            )  # fmt: skip
            records.append(path.read_bytes())
        assert records[0] == records[1]
        env = {**os.environ, "PYTHONHASHSEED": "3"}
        done = subprocess.run(
            [*GAMMA, "replay", str(LOG), "--expect", str(tmp_path / "seed1.json")],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("identical")

    def test_appended_events_do_not_disturb(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Events appended after the record, even with ts <= t, leave replay identical."""
        record = audit(capsys, tmp_path / "a.json")
        grown = tmp_path / "grown.jsonl"
        later = [
            {"id": "e34", "type": "retract", "ts": "2026-03-01T09:40:00Z", "actor": "crm",
             "tenant": "acme", "fact": "F1"},
            {"id": "e35", "type": "assert", "ts": "2026-03-02T09:00:00Z", "actor": "crm",
             "tenant": "acme", "fact": "F30", "key": "promo", "value": "late"},
        ]  # fmt: skip
        grown.write_text(LOG.read_text() + "".join(json.dumps(e) + "\n" for e in later))
        code, out, _ = gamma(capsys, "replay", grown, "--expect", record)
        assert code == 0, out

    def test_edited_event(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An edited event: exit 1, the head mismatch named, the changed fact shown."""
        record = audit(capsys, tmp_path / "a.json")
        edited = tmp_path / "edited.jsonl"
        edited.write_text(LOG.read_text().replace('"value": "EMEA"', '"value": "APAC"', 1))
        code, out, _ = gamma(capsys, "replay", edited, "--expect", record)
        assert code == 1
        assert "log: head mismatch: the first 33 events hash to " in out
        assert json.loads(record.read_text())["log"] in out
        assert 'F1 region: value: "EMEA" -> "APAC"' in out

    def test_changed_policy(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A named policy is found without --policy; another --policy replays under it and is
        different (exit 1, naming the policy); a policy file gamma does not know: exit 2."""
        record = audit(capsys, tmp_path / "strict.json", "--policy", "strict")
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 0 and out.startswith("identical")
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record, "--policy", MULTIVALUE)
        assert code == 1 and out.startswith("different")
        assert out.splitlines()[1].startswith("policy: the record was made under")
        assert "made under " + json.loads(record.read_text())["policy"] in out
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record, "--policy", STRICT)
        assert code == 0 and out.startswith("identical")
        custom = tmp_path / "custom.toml"
        custom.write_text('[authority]\ndefault = "manager"\n')
        record = audit(capsys, tmp_path / "custom.json", "--policy", custom)
        code, _, err = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 2
        assert "field 'policy'" in err and "--policy FILE" in err and "'strict'" in err
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record, "--policy", custom)
        assert code == 0 and out.startswith("identical")

    def test_edited_policy_digest(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A record whose policy digest was edited matches no policy: exit 2."""
        record = audit(capsys, tmp_path / "a.json")
        edit(record, lambda r: r.__setitem__("policy", "0" * 64))
        code, _, err = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 2 and "0" * 64 in err

    def test_semantic_change(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An edited outcome in the record: exit 1 with a diff naming the fact and its codes."""
        record = audit(capsys, tmp_path / "a.json")

        def exclude_f3(r: dict) -> None:  # type: ignore[type-arg]
            r["admitted"] = [a for a in r["admitted"] if a["fact"] != "F3"]
            r["excluded"].append({"fact": "F3", "key": "discount", "reasons": [
                {"code": "superseded", "events": ["e02"], "facts": ["F2"]}]})  # fmt: skip
            f9 = next(x for x in r["excluded"] if x["fact"] == "F9")
            f9["reasons"] = [{"code": "retracted", "events": ["e28"], "facts": []}]

        edit(record, exclude_f3)
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 1
        expected = "admitted in replay, not in record:\n"
        expected += "  F3 discount (record: excluded: superseded)"
        assert expected in out
        assert "exclusion codes changed (record -> replay):\n  F9 promo: retracted -> draft" in out
        assert "the record was edited after it was written" in out

    def test_store_with_its_own_policy(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A store's policy is a candidate: its records replay without --policy; a copy does
        not (the policy is no named one)."""
        store_module = pytest.importorskip("gamma.storage.store")
        from gamma.core.terms.policy import load_policy

        db = tmp_path / "s.db"
        custom = tmp_path / "custom.toml"
        custom.write_text('[authority]\ndefault = "manager"\n')
        store = store_module.Store.init(db, policy=load_policy(custom))
        store.append(LOG.read_text())
        store.close()
        record = audit(capsys, tmp_path / "a.json", log=db)
        code, out, _ = gamma(capsys, "replay", db, "--expect", record)
        assert code == 0 and out.startswith("identical: replayed 33 events")
        code, _, err = gamma(capsys, "replay", LOG, "--expect", record)
        assert code == 2 and "field 'policy'" in err

    def test_json_output(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints one canonical line with the checks and the diff."""
        record = audit(capsys, tmp_path / "a.json")
        code, out, _ = gamma(capsys, "replay", LOG, "--expect", record, "--json")
        data = json.loads(out)
        assert code == 0 and data["ok"] is True and data["head"]["ok"] is True
        assert data["events"] == data["available"] == 33

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ('{"engine": "0.1.0"', None),
            ("{}", "actor"),
            ("MISSING_LOG", "log"),
            ("BAD_CODE", "excluded[0].reasons[0].code"),
        ],
        ids=["not JSON", "empty object", "missing log", "unknown code"],
    )
    def test_malformed_record(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str | None
    ) -> None:
        """A malformed audit record exits 2 naming the file and the field."""
        path = audit(capsys, tmp_path / "a.json")
        record = json.loads(path.read_text())
        if text == "MISSING_LOG":
            del record["log"]
            text = json.dumps(record)
        elif text == "BAD_CODE":
            record["excluded"][0]["reasons"][0]["code"] = "vanished"
            text = json.dumps(record)
        path.write_text(text)
        code, out, err = gamma(capsys, "replay", LOG, "--expect", path)
        assert code == 2 and out == ""
        assert str(path) in err
        if field is not None:
            assert f"field {field!r}" in err

    def test_missing_record_and_log(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A missing record or log is an input error: exit 2."""
        code, _, err = gamma(capsys, "replay", LOG, "--expect", tmp_path / "none.json")
        assert code == 2 and "no such audit record" in err
        record = audit(capsys, tmp_path / "a.json")
        code, _, _ = gamma(capsys, "replay", tmp_path / "none.jsonl", "--expect", record)
        assert code == 2

    def test_one_log_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """With -v, replay logs one structured line on stderr with its outcome and counts."""
        record = audit(capsys, tmp_path / "a.json")
        assert gamma(capsys, "replay", LOG, "--expect", record)[2] == ""
        _, _, err = gamma(capsys, "-v", "replay", LOG, "--expect", record)
        (line,) = [json.loads(ln) for ln in err.splitlines()]
        assert line["command"] == "replay" and line["identical"] is True and line["events"] == 33


class TestAuditDiff:
    def test_two_times(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Records for two times: exit 1, newly admitted/excluded facts and changed codes named."""
        early = audit(capsys, tmp_path / "early.json", at="2026-03-01T09:20:00Z")
        late = audit(capsys, tmp_path / "late.json")
        code, out, _ = gamma(capsys, "audit", "diff", early, late)
        assert code == 1
        assert out.startswith(f"A: {early}\nB: {late}\n")
        assert 'at: "2026-03-01T09:20:00Z" -> "2026-03-02T10:00:00Z"' in out
        assert "admitted in B, not in A:\n  F19 renewal_terms (A: absent)" in out
        assert "excluded in B, not in A:\n  F11 webinar_code: expired (A: admitted)" in out
        assert "experiences changed (A -> B):\n  X1: verdict (absent) -> KEEP" in out

    def test_changed_codes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Changed codes of a fact excluded in both records are listed old -> new."""
        log = tmp_path / "log.jsonl"
        log.write_text(LOG.read_text() + json.dumps(
            {"id": "e34", "type": "retract", "ts": "2026-03-01T09:40:00Z", "actor": "crm",
             "tenant": "acme", "fact": "F9"}) + "\n")  # fmt: skip
        before = audit(capsys, tmp_path / "before.json", log=log, at="2026-03-01T09:35:00Z")
        after = audit(capsys, tmp_path / "after.json", log=log)
        code, out, _ = gamma(capsys, "audit", "diff", before, after)
        assert code == 1
        assert "exclusion codes changed (A -> B):\n  F9 promo: draft -> draft, retracted" in out

    def test_same(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Two records of the same resolution: exit 0, no differences."""
        a = audit(capsys, tmp_path / "a.json")
        b = audit(capsys, tmp_path / "b.json")
        code, out, _ = gamma(capsys, "audit", "diff", a, b)
        assert code == 0 and out.endswith("no differences\n")

    def test_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json: one canonical object with same, fields, facts, experiences, ignored."""
        early = audit(capsys, tmp_path / "early.json", at="2026-03-01T09:20:00Z")
        late = audit(capsys, tmp_path / "late.json")
        code, out, _ = gamma(capsys, "audit", "diff", early, late, "--json")
        data = json.loads(out)
        assert code == 1 and data["same"] is False
        assert sorted(data) == ["experiences", "facts", "fields", "ignored", "same"]
        f11 = next(f for f in data["facts"] if f["fact"] == "F11")
        assert f11["change"] == "excluded" and f11["b"]["codes"] == ["expired"]

    def test_malformed(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A malformed record exits 2 naming the field."""
        a = audit(capsys, tmp_path / "a.json")
        b = tmp_path / "b.json"
        b.write_text(a.read_text().replace('"engine":', '"engin":'))
        code, _, err = gamma(capsys, "audit", "diff", a, b)
        assert code == 2 and "field 'engin'" in err


@pytest.mark.parametrize("args", [["replay"], ["audit"], ["audit", "diff"]])
def test_help(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Every audit command has help text."""
    code, out, _ = gamma(capsys, *args, "--help")
    assert code == 0 and "Usage:" in out and len(out.splitlines()) > 3
