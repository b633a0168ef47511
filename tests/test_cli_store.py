"""The store commands end to end through ``gamma.cli.main``: output, exit statuses, log lines."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import structlog
from click.testing import CliRunner
from helpers import A, R, stamp

from gamma.cli import main
from gamma.core.integrity.chain import GENESIS_HEX, step
from gamma.core.integrity.merkle import CompactRange
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.policy import DEFAULT_POLICY
from gamma.storage.tree import tree_rows

ROOT = Path(__file__).resolve().parent.parent
KEY = "a key of thirty-two bytes, ok!!!"


@attrs.frozen
class Run:
    code: int
    out: str
    err: str

    def log_line(self) -> dict[str, object]:
        """The one structured line the command logged on stderr."""
        lines = [json.loads(x) for x in self.err.splitlines() if x.startswith("{")]
        assert len(lines) == 1, self.err
        line: dict[str, object] = lines[0]
        return line


def gamma(*args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Run:
    """Run the CLI in process, its structured log line asked for (``log_line`` reads it)."""
    env = {"GAMMA_LOG_LEVEL": "info", **(env or {})}
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env=env) as (out, err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Run(code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("GAMMA_CHAIN_KEY", raising=False)
    yield
    structlog.reset_defaults()


def raw_lines() -> list[str]:
    events = [A("F1", "region", "EMEA"), A("F2", "tone", "concise"), R("F1")]
    stamped = stamp(events)
    stamped[1]["tenant"] = "globex"
    stamped[1]["ts"] = "2026-03-01T10:02:00+01:00"
    return [json.dumps(e) for e in stamped]


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    target = tmp_path / "events.jsonl"
    target.write_text("\n".join(raw_lines()) + "\n", encoding="utf-8")
    return target


@pytest.fixture
def store(tmp_path: Path, events_file: Path) -> Path:
    target = tmp_path / "log.db"
    assert gamma("init", str(target)).code == 0
    assert gamma("append", str(target), str(events_file)).code == 0
    return target


class TestHelp:
    @pytest.mark.parametrize("name", ["init", "append", "export", "log", "verify"])
    def test_every_command_has_help(self, name: str) -> None:
        run = gamma(name, "--help")
        assert run.code == 0 and "Usage:" in run.out and len(run.out.splitlines()) > 4


class TestInitAppend:
    def test_init_prints_the_empty_head_and_policy(self, tmp_path: Path) -> None:
        run = gamma(
            "init", str(tmp_path / "s.db"), "--policy", str(ROOT / "policies" / "default.toml")
        )
        assert run.code == 0
        assert json.loads(run.out) == {
            "head": GENESIS_HEX,
            "keyed": False,
            "policy": DEFAULT_POLICY.digest,
        }
        assert run.log_line()["command"] == "init"

    def test_init_refuses_a_non_empty_file(self, store: Path) -> None:
        run = gamma("init", str(store))
        assert run.code == 2 and "exists and is not empty" in run.err

    def test_append_prints_counts_and_head(self, tmp_path: Path, events_file: Path) -> None:
        """append prints canonical {"appended", "events", "head"}; a retry appends nothing."""
        target = tmp_path / "s.db"
        gamma("init", str(target))
        first = gamma("append", str(target), str(events_file))
        assert first.code == 0
        body = json.loads(first.out)
        assert first.out.strip() == canonical_json(body)
        assert (body["appended"], body["events"]) == (3, 3)
        assert first.log_line() | {} and first.log_line()["appended"] == 3
        again = gamma("append", str(target), "-", input=events_file.read_bytes())
        assert json.loads(again.out) == {"appended": 0, "events": 3, "head": body["head"]}

    def test_append_from_stdin_with_stamped_ts(self, store: Path) -> None:
        line = json.dumps(
            {
                "id": "n1",
                "type": "assert",
                "actor": "a",
                "tenant": "acme",
                "fact": "N1",
                "key": "k",
                "value": 1,
            }
        )
        run = gamma("append", str(store), "-", input=line + "\n")
        assert run.code == 0 and json.loads(run.out)["appended"] == 1
        exported = gamma("export", str(store)).out.splitlines()
        assert json.loads(exported[-1])["ts"].endswith("Z")

    @pytest.mark.parametrize(
        ("line", "needle"),
        [
            ("{broken", "line 2"),
            (
                json.dumps(stamp([R("NOPE")])[0] | {"id": "r9", "ts": "2026-03-02T00:00:00Z"}),
                "'fact'",
            ),
            (json.dumps(stamp([A("F1", "region", "APAC")])[0]), "field 'id'"),
            (
                json.dumps(
                    stamp([A("F8", "k", "v")])[0] | {"id": "old", "ts": "2020-01-01T00:00:00Z"}
                ),
                "'ts'",
            ),
        ],
        ids=["json", "reference", "same-id-other-content", "ts-backwards"],
    )
    def test_rejected_batch_exits_2_and_stores_nothing(
        self, store: Path, tmp_path: Path, line: str, needle: str
    ) -> None:
        before = gamma("verify", str(store)).out
        batch = tmp_path / "batch.jsonl"
        good = json.dumps(
            stamp([A("G1", "k", "v")])[0] | {"id": "g1", "ts": "2026-03-02T00:00:00Z"}
        )
        batch.write_text(good + "\n" + line + "\n", encoding="utf-8")
        run = gamma("append", str(store), str(batch))
        assert run.code == 2, run.err
        (error,) = [x for x in run.err.splitlines() if x.startswith("Error: ")]
        assert str(batch) in error and needle in error
        assert gamma("verify", str(store)).out == before

    def test_unreadable_inputs_exit_2(self, store: Path, tmp_path: Path) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(b"\n\xff\n")
        not_utf8 = gamma("append", str(store), str(bad))
        assert not_utf8.code == 2 and "line 2" in not_utf8.err
        assert gamma("append", str(store), str(tmp_path / "missing.jsonl")).code == 2
        assert gamma("append", str(tmp_path / "missing.db"), str(bad)).code == 2
        assert gamma("export", str(bad)).code == 2


def ids(run: Run) -> list[str]:
    return [json.loads(x)["id"] for x in run.out.splitlines()]


class TestReadBack:
    def test_export_is_the_canonicalised_input(self, store: Path) -> None:
        run = gamma("export", str(store))
        expected = "".join(canonical_event(e) + "\n" for e in parse_events(raw_lines()))
        assert run.code == 0 and run.out == expected
        assert run.log_line()["events"] == 3

    def test_log_slices(self, store: Path) -> None:
        assert ids(gamma("log", str(store), "--tenant", "acme")) == ["e1", "e3"]
        # e2 is 10:02+01:00 = 09:02Z; both bounds inclusive
        assert ids(gamma("log", str(store), "--since", "2026-03-01T09:02:00Z")) == ["e2", "e3"]
        assert ids(gamma("log", str(store), "--until", "2026-03-01T09:02:00Z")) == ["e1", "e2"]
        assert gamma("log", str(store), "--since", "yesterday").code == 2


class TestVerify:
    def test_intact_store_and_file(self, store: Path, tmp_path: Path) -> None:
        """Intact: exit 0 and the head on stdout; the exported file has the same head."""
        run = gamma("verify", str(store))
        head = run.out.strip()
        assert run.code == 0 and len(head) == 64
        exported = tmp_path / "out.jsonl"
        exported.write_text(gamma("export", str(store)).out, encoding="utf-8")
        assert gamma("verify", str(exported), "--expect-head", head).code == 0
        report = json.loads(gamma("verify", str(store), "--json").out)
        assert report["ok"] is True and report["head"] == head and report["events"] == 3

    def test_tampered_store_exits_1(self, store: Path) -> None:
        conn = sqlite3.connect(store, isolation_level=None)
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "UPDATE events SET body = replace(body, 'concise', 'verbose') WHERE position = 2"
        )
        conn.close()
        run = gamma("verify", str(store))
        assert run.code == 1 and run.out == ""
        assert "tampered" in run.err and "position 2 (event e2)" in run.err
        report = json.loads(gamma("verify", str(store), "--json").out)
        assert (report["ok"], report["kind"], report["position"], report["event"]) == (
            False,
            "edited",
            2,
            "e2",
        )

    def test_expect_head_and_prefix(self, store: Path, tmp_path: Path) -> None:
        head = gamma("verify", str(store)).out.strip()
        more = tmp_path / "more.jsonl"
        more.write_text(
            json.dumps(stamp([A("F9", "k", "v")])[0] | {"id": "e9", "ts": "2026-03-03T00:00:00Z"})
        )
        gamma("append", str(store), str(more))
        grown = gamma("verify", str(store), "--expect-head", head)
        assert grown.code == 1 and "grown" in grown.err
        assert gamma("verify", str(store), "--expect-prefix", head).code == 0
        assert gamma("verify", str(store), "--expect-head", "f" * 64).code == 1
        assert gamma("verify", str(store), "--expect-head", "nothex").code == 2

    def test_unreadable_exits_2(self, tmp_path: Path) -> None:
        garbage = tmp_path / "garbage.jsonl"
        garbage.write_text("{nope\n")
        assert gamma("verify", str(garbage)).code == 2
        assert gamma("verify", str(tmp_path / "missing")).code == 2


class TestKeyed:
    def test_keyed_store_round_trip(self, tmp_path: Path, events_file: Path) -> None:
        """The key comes from --key-file (whitespace stripped) or GAMMA_CHAIN_KEY; appends need it."""
        key_file = tmp_path / "chain.key"
        key_file.write_text(f"  {KEY}\n")
        target = tmp_path / "k.db"
        init = gamma("init", str(target), "--key-file", str(key_file))
        assert init.code == 0 and json.loads(init.out)["keyed"] is True
        assert gamma("append", str(target), str(events_file)).code == 2
        assert (
            gamma("append", str(target), str(events_file), env={"GAMMA_CHAIN_KEY": KEY}).code == 0
        )
        wrong = gamma("append", str(target), str(events_file), env={"GAMMA_CHAIN_KEY": "x" * 20})
        assert wrong.code == 2 and "not the one" in wrong.err
        assert gamma("verify", str(target), "--key-file", str(key_file)).code == 0
        plain = gamma("verify", str(target))
        assert plain.code == 0 and "note:" in plain.err

    def test_keyed_chain_catches_a_recomputed_plain_chain(
        self, tmp_path: Path, events_file: Path
    ) -> None:
        target = tmp_path / "k.db"
        gamma("init", str(target), env={"GAMMA_CHAIN_KEY": KEY})
        gamma("append", str(target), str(events_file), env={"GAMMA_CHAIN_KEY": KEY})
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("DROP TRIGGER events_no_update")
        rows = conn.execute(
            "SELECT position, body, prev_head FROM events ORDER BY position"
        ).fetchall()
        prev = bytes.fromhex(rows[0][2])
        for position, body, _ in rows:
            body = body.replace("EMEA", "APAC")
            head = step(prev, body)
            conn.execute(
                "UPDATE events SET body = ?, prev_head = ?, head = ? WHERE position = ?",
                [body, prev.hex(), head.hex(), position],
            )
            prev = head
        # and the tree over the new bodies: what an unkeyed verify computes all matches
        for trigger in ("tree_no_delete", "tree_in_order", "tree_no_replace"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute("DELETE FROM tree")
        bodies = [r[0] for r in conn.execute("SELECT body FROM events ORDER BY position")]
        for row in tree_rows(CompactRange(), bodies):
            conn.execute("INSERT INTO tree (position, hashes) VALUES (?, ?)", row)
        conn.close()
        assert gamma("verify", str(target)).code == 0
        keyed = gamma("verify", str(target), env={"GAMMA_CHAIN_KEY": KEY})
        assert keyed.code == 1 and "keyed chain" in keyed.err and "event e1" in keyed.err

    def test_short_key_exits_2(self, tmp_path: Path) -> None:
        key_file = tmp_path / "short.key"
        key_file.write_text("  too short   \n")
        run = gamma("init", str(tmp_path / "s.db"), "--key-file", str(key_file))
        assert run.code == 2 and "16 bytes" in run.err and str(key_file) in run.err


class TestBusy:
    def test_lock_held_too_long_exits_3(
        self, store: Path, events_file: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr("gamma.storage.store.BUSY_TIMEOUT", 0.1)
        holder = sqlite3.connect(store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            line = json.dumps(
                {"id": "b1", "type": "retract", "actor": "a", "tenant": "acme", "fact": "F2"}
            )
            run = gamma("append", str(store), "-", input=line)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert run.code == 3 and "busy timeout" in run.err
        assert run.log_line()["outcome"] == "busy" and run.log_line()["error"] == "StoreBusyError"


class TestHostileInputEverywhere:
    """Issue 11: bad input is exit 2 naming line and field in every reader."""

    HUGE = "9" * 5000

    def huge_log(self, tmp_path: Path) -> Path:
        lines = raw_lines()
        lines.insert(1, lines[0].replace('"EMEA"', self.HUGE).replace('"e1"', '"e9"').replace('"F1"', '"F9"'))
        target = tmp_path / "huge.jsonl"
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return target

    @pytest.mark.parametrize("command", ["resolve", "verify", "append"])
    def test_huge_integer_is_exit_2_with_line_and_field(self, tmp_path: Path, command: str) -> None:
        log = self.huge_log(tmp_path)
        if command == "append":
            target = tmp_path / "s.db"
            assert gamma("init", str(target)).code == 0
            run = gamma("append", str(target), str(log))
        elif command in ("resolve", "validate"):
            run = gamma(command, str(log), "--actor", "alice", "--at", "2026-03-02T00:00:00Z")
        else:
            run = gamma(command, str(log))
        assert run.code == 2, (run.out, run.err)
        assert "line 2" in run.err and "value" in run.err, run.err

    @pytest.mark.parametrize("command", ["verify", "resolve"])
    def test_zero_byte_file_is_an_error(self, tmp_path: Path, command: str) -> None:
        empty = tmp_path / "empty"
        empty.write_bytes(b"")
        at = ["--actor", "alice", "--at", "2026-03-02T00:00:00Z"]
        args = at if command in ("resolve", "validate") else []
        run = gamma(command, str(empty), *args)
        assert run.code == 2, (run.out, run.err)
        assert "empty" in run.err

    def test_init_still_accepts_an_empty_file(self, tmp_path: Path) -> None:
        empty = tmp_path / "new.db"
        empty.write_bytes(b"")
        assert gamma("init", str(empty)).code == 0

    def test_append_refuses_an_over_claim_under_strict(self, tmp_path: Path) -> None:
        """The store applies the writers' rule at append: an unlisted writer claiming
        executive authority under strict.toml is refused, and nothing is stored."""
        target = tmp_path / "s.db"
        assert gamma("init", str(target), "--policy", str(ROOT / "policies" / "strict.toml")).code == 0
        bad = stamp([A("F1", "k", "v"), A("F2", "k", "w", authority="executive", actor="mallory")])
        events = tmp_path / "bad.jsonl"
        events.write_text("".join(json.dumps(e) + "\n" for e in bad), encoding="utf-8")
        run = gamma("append", str(target), str(events))
        assert run.code == 2 and "authority" in run.err and "mallory" in run.err, run.err
        assert gamma("export", str(target)).out == ""
        ok = stamp([A("F1", "k", "v", authority="executive", actor="ceo")])
        events.write_text(json.dumps(ok[0]) + "\n", encoding="utf-8")
        assert gamma("append", str(target), str(events)).code == 0
