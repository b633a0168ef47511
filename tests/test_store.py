"""The append-only store: init, append (all or nothing), skipping, stamping, reading back."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import T0, A, G, R, X, parse_lines, stamp, ts
from hypothesis import assume, given
from hypothesis import strategies as st
from strategies import Log, Malformed, logs, malformed_logs, written_jsonl

from gamma.core.integrity.chain import GENESIS_HEX, head_of
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.terms.canonical import canonical_json, format_ts
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    IntegrityError,
    JSONSyntaxError,
    StoreBusyError,
    StoreError,
    TimestampOrderError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.policy import DEFAULT_POLICY, parse_policy
from gamma.storage.migrations import (
    LATEST,
    MIGRATIONS,
    TABLES,
    Migration,
    current_version,
    migrate,
    schema_rows,
)
from gamma.storage.seal import (
    KEYED_SEAL,
    SEAL,
    STORE_KEYED_SEAL,
    STORE_SEAL,
    seal_rows,
    store_seals,
)
from gamma.storage.sources import open_log
from gamma.storage.store import Store
from gamma.storage.verify import verify_file

KEY = b"k" * 32


def lines(*events: dict[str, Any]) -> list[str]:
    """Stamped events as raw JSON lines (keys in writing order, not canonical)."""
    return [json.dumps(e) for e in stamp(events)]


def ids(got: Iterable[str]) -> list[str]:
    return [json.loads(x)["id"] for x in got]


def canonical_lines(raw: list[str]) -> list[str]:
    return [canonical_event(e) for e in parse_events(raw)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "log.db"


@pytest.fixture
def store(path: Path) -> Any:
    with Store.init(path) as created:
        yield created


def sample() -> list[str]:
    return lines(
        A("F1", "region", "EMEA"),
        A("F2", "discount", "10%", scope="helios", visibility={"roles": ["sales"]}),
        R("F1", reason="moved"),
        G(fact="F2", role="finance"),
        X("E1", uses=["F2"], applicability="adaptable"),
    )


class TestInit:
    def test_creates_schema_wal_and_records_policy(self, path: Path) -> None:
        """A new store is in WAL mode, at the latest schema version, with its policy recorded."""
        policy = parse_policy('[authority]\nladder = ["low", "high"]\ndefault = "low"\n')
        with Store.init(path, policy=policy) as created:
            assert created.head() == GENESIS_HEX
            assert len(created) == 0
            assert created.policy == policy
            assert not created.keyed
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == LATEST
        meta = dict(conn.execute("SELECT name, value FROM store_meta"))
        assert meta["policy"] == canonical_json(policy.to_dict())
        assert meta["policy_digest"] == policy.digest
        with Store.open(path) as reopened:
            assert reopened.policy == policy
            assert reopened.policy.digest == policy.digest

    def test_refuses_an_existing_non_empty_file(self, path: Path) -> None:
        """init never overwrites: a non-empty file (a store or anything else) is refused."""
        path.write_text("not empty")
        with pytest.raises(InputError, match="exists and is not empty"):
            Store.init(path)
        assert path.read_text() == "not empty"

    def test_refuses_a_second_init(self, path: Path) -> None:
        """Initialising a store twice is refused and leaves it intact."""
        Store.init(path).close()
        with pytest.raises(InputError):
            Store.init(path)
        with Store.open(path) as reopened:
            assert reopened.head() == GENESIS_HEX

    def test_accepts_an_empty_file(self, path: Path) -> None:
        """An empty file (e.g. from mktemp) becomes a store."""
        path.touch()
        with Store.init(path) as created:
            assert created.head() == GENESIS_HEX

    def test_keyed_store_records_it_and_refuses_short_keys(self, path: Path) -> None:
        """A key under 16 bytes (after stripping whitespace) is refused."""
        with pytest.raises(InputError, match="16 bytes"):
            Store.init(path, key=b"  short key \n")
        assert not path.exists() or path.stat().st_size == 0
        with Store.init(path, key=b"  " + KEY + b"\n") as created:
            assert created.keyed

    def test_open_refuses_missing_and_foreign_files(self, tmp_path: Path) -> None:
        """Opening something that is not a store is an input error, not a crash."""
        with pytest.raises(InputError, match="no such store"):
            Store.open(tmp_path / "missing.db")
        other = tmp_path / "plain.jsonl"
        other.write_text("{}\n")
        with pytest.raises(InputError, match="not a gamma store"):
            Store.open(other)
        foreign = tmp_path / "foreign.db"
        sqlite3.connect(foreign).execute("CREATE TABLE t (x)")
        with pytest.raises(StoreError, match="not a gamma store"):
            Store.open(foreign)


class TestAppend:
    def test_head_is_the_chain_over_canonical_events(self, store: Store) -> None:
        """The store's head equals the chain computed over the canonicalised input."""
        raw = sample()
        result = store.append(raw)
        assert result.appended == 5 and result.events == 5
        assert result.head == head_of(canonical_lines(raw)) == store.head()

    def test_export_is_byte_identical_to_canonicalised_input(self, store: Store) -> None:
        """export gives back exactly the canonical bytes of what was appended."""
        raw = lines(
            A("F1", "k", "x", ts="2026-03-01T10:00:00+01:00"),
            A("F2", "k2", "ünïcødé ✓", valid_from="2026-03-01T09:00:00.5Z"),
        )
        store.append(raw)
        assert list(store.export()) == canonical_lines(raw)
        assert next(iter(store.export())).count('"ts":"2026-03-01T09:00:00Z"') == 1

    def test_round_trip_events_store_export_events(self, store: Store) -> None:
        """events -> store -> export -> events gives the same events."""
        events = parse_events(sample())
        store.append(events)
        assert store.events() == events
        assert parse_events(list(store.export())) == events

    def test_appends_across_batches_use_the_index(self, store: Store) -> None:
        """A later batch may refer to facts stored by an earlier one."""
        first, second = sample()[:2], sample()[2:]
        store.append(first)
        result = store.append(second)
        assert result.appended == 3
        assert result.head == head_of(canonical_lines(sample()))

    def test_identical_event_re_appended_is_skipped(self, store: Store) -> None:
        """A retried batch (e.g. after a crash after commit) stores nothing twice."""
        store.append(sample())
        head = store.head()
        again = store.append(sample())
        assert (again.appended, again.events, again.head) == (0, 5, head)
        # the same event written with other key order or offset is still identical
        reordered = json.dumps(dict(reversed(list(json.loads(sample()[0]).items()))))
        assert store.append([reordered]).appended == 0

    def test_same_id_different_content_is_refused(self, store: Store) -> None:
        """Reusing an event id for other content names the line and field ``id``."""
        store.append(sample())
        head = store.head()
        changed = json.loads(sample()[0])
        changed["value"] = "APAC"
        extra = json.dumps({**json.loads(sample()[0]), "id": "new1", "fact": "N1", "ts": ts(9)})
        with pytest.raises(DuplicateIdError) as info:
            store.append([extra, json.dumps(changed)], source="batch.jsonl")
        assert (info.value.line, info.value.field, info.value.source) == (2, "id", "batch.jsonl")
        assert "e1" in str(info.value)
        assert store.head() == head and len(store) == 5

    def test_same_id_twice_in_one_batch(self, store: Store) -> None:
        """One rule with a JSONL file (issue 11): a batch repeating an event, identical or
        not, is refused; a retry of a batch already stored is skipped."""
        one = lines(A("F1", "k", "v"))[0]
        with pytest.raises(DuplicateIdError) as info:
            store.append([one, one])
        assert (info.value.line, info.value.field) == (2, "id")
        assert len(store) == 0
        with pytest.raises(DuplicateIdError):
            parse_lines([one, one])
        assert store.append([one]).appended == 1
        assert store.append([one]).appended == 0
        other = json.dumps({**json.loads(one), "id": "e9", "fact": "F9"})
        changed = json.dumps({**json.loads(other), "value": "w"})
        with pytest.raises(DuplicateIdError) as info:
            store.append([other, changed])
        assert (info.value.line, info.value.field) == (2, "id")

    @pytest.mark.parametrize(
        ("bad", "error", "field"),
        [
            ("{not json", JSONSyntaxError, None),
            (json.dumps({"type": "assert"}), InputError, "id"),
            (
                json.dumps(stamp([R("NOPE")])[0] | {"id": "x1", "ts": ts(99)}),
                UnknownReferenceError,
                "fact",
            ),
            (
                json.dumps(stamp([A("F1", "k", "v")])[0] | {"id": "x2", "ts": ts(99)}),
                DuplicateIdError,
                "fact",
            ),
            (
                json.dumps(stamp([A("F9", "k", 1.5)])[0] | {"id": "x3", "ts": ts(99)}),
                ValueTypeError,
                "value",
            ),
            (
                json.dumps(
                    stamp([A("F9", "k", "v", authority="boss")])[0] | {"id": "x4", "ts": ts(99)}
                ),
                ValueTypeError,
                "authority",
            ),
            (
                json.dumps(stamp([X("E1", uses=["F1"])])[0] | {"id": "x5", "ts": ts(99)}),
                DuplicateIdError,
                "experience",
            ),
        ],
        ids=[
            "json",
            "missing",
            "unknown-ref",
            "fact-reused",
            "float",
            "authority",
            "experience-reused",
        ],
    )
    def test_rejected_batch_changes_nothing(
        self, store: Store, bad: str, error: type[Exception], field: str | None
    ) -> None:
        """A batch with one bad line stores none of its lines; the head is unchanged."""
        store.append(sample())
        head = store.head()
        good = json.dumps(stamp([A("G1", "k", "v")])[0] | {"id": "g1", "ts": ts(50)})
        with pytest.raises(error) as info:
            store.append([good, bad], source="in.jsonl")
        assert isinstance(info.value, InputError)
        assert info.value.line == 2 and info.value.field == field
        assert store.head() == head and len(store) == 5

    def test_other_tenants_fact_is_refused(self, store: Store) -> None:
        """References are checked against the stored fact's tenant."""
        store.append(lines(A("F1", "k", "v")))
        other = json.dumps({**stamp([R("F1")])[0], "id": "r1", "tenant": "globex", "ts": ts(5)})
        with pytest.raises(UnknownReferenceError, match="another tenant"):
            store.append([other])

    def test_store_policy_governs_appends(self, path: Path) -> None:
        """Authority names are checked against the policy recorded at init."""
        policy = parse_policy('[authority]\nladder = ["low", "high"]\ndefault = "low"\n')
        with Store.init(path, policy=policy) as created:
            assert created.append(lines(A("F1", "k", "v", authority="high"))).appended == 1
            with pytest.raises(ValueTypeError, match="unknown authority"):
                created.append(lines(A("F2", "k", "v", authority="peer")))

    def test_accepts_dicts_and_events(self, store: Store) -> None:
        """Python callers may pass decoded objects or Event values instead of lines."""
        dicts = stamp([A("F1", "k", "v")])
        store.append(dicts)
        events = parse_events(sample()[1:2])
        store.append(events)
        assert [e.id for e in store.events()] == ["e1", "e2"]


class TestTimestamps:
    def test_missing_ts_is_stamped_with_now(self, store: Store) -> None:
        """An event without ts gets the injected ``now`` (the store is the only clock reader)."""
        now = datetime(2026, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
        body = {k: v for k, v in stamp([A("F1", "k", "v")])[0].items() if k != "ts"}
        store.append([json.dumps(body)], now=now)
        (event,) = store.events()
        assert event.ts == now
        assert '"ts":"2026-05-01T12:00:00.250000Z"' in next(store.export())

    def test_stamp_never_goes_ahead_of_the_clock(self, store: Store) -> None:
        """With a clock behind the head, an event without ts is refused (it could only be
        stamped ahead of the clock or backwards), naming ts; nothing is stored."""
        store.append(lines(A("F1", "k", "v")))  # ts = T0 + 1 min
        late_clock = T0 - timedelta(days=1)
        body = {k: v for k, v in stamp([A("F2", "k", "w")])[0].items() if k != "ts"}
        with pytest.raises(InputError) as info:
            store.append([json.dumps(body | {"id": "e2"})], now=late_clock)
        assert (info.value.line, info.value.field) == (1, "ts")
        assert "ahead of the store's clock" in str(info.value)
        assert len(store) == 1

    def test_future_ts_is_refused(self, store: Store) -> None:
        """Issue 11: a ts more than the policy's skew (5 minutes) ahead of the clock is
        refused, so one 9999 stamp cannot poison every later append."""
        now = T0
        poison = json.dumps(stamp([A("F1", "k", "v")])[0] | {"ts": "9999-12-31T00:00:00Z"})
        with pytest.raises(InputError) as info:
            store.append(["", poison], now=now)
        assert (info.value.line, info.value.field) == (2, "ts")
        assert len(store) == 0
        near = json.dumps(stamp([A("F1", "k", "v")])[0] | {"ts": ts(5)})  # T0 + 5 minutes
        assert store.append([near], now=now).appended == 1
        later = json.dumps(stamp([A("F2", "k", "w")])[0] | {"id": "e2", "ts": ts(5.5)})
        with pytest.raises(InputError):
            store.append([later], now=now)

    def test_skew_comes_from_the_policy(self, path: Path) -> None:
        policy = parse_policy("[store]\nclock_skew_seconds = 3600\n")
        with Store.init(path, policy=policy) as store:
            event = json.dumps(stamp([A("F1", "k", "v")])[0] | {"ts": ts(59)})
            assert store.append([event], now=T0).appended == 1

    def test_stamped_event_retried_is_skipped(self, store: Store) -> None:
        """A ts-less event retried later matches its stored stamp and is skipped."""
        body = json.dumps({k: v for k, v in stamp([A("F1", "k", "v")])[0].items() if k != "ts"})
        store.append([body], now=T0)
        retry = store.append([body], now=T0 + timedelta(hours=1))
        assert retry.appended == 0

    def test_batch_going_backwards_is_refused(self, store: Store) -> None:
        """An explicit ts before the head's ts is refused and nothing is stored."""
        store.append(lines(A("F1", "k", "v"), A("F2", "k2", "v")))
        head = store.head()
        back = json.dumps(stamp([A("F3", "k3", "v")])[0] | {"id": "e3", "ts": ts(1)})
        with pytest.raises(TimestampOrderError) as info:
            store.append([back])
        assert info.value.field == "ts" and store.head() == head

    def test_naive_now_is_refused(self, store: Store) -> None:
        with pytest.raises(InputError, match="time zone"):
            store.append(lines(A("F1", "k", "v")), now=datetime(2026, 1, 1))


class TestReading:
    def test_slice_by_tenant_and_inclusive_bounds(self, store: Store) -> None:
        """log slices by tenant and by ts, both bounds inclusive."""
        raw = lines(A("F1", "k", "a"), A("F2", "k", "b"), A("F3", "k", "c"), A("F4", "k", "d"))
        raw[1] = json.dumps(json.loads(raw[1]) | {"tenant": "globex"})
        store.append(raw)
        assert ids(store.slice(tenant="acme")) == ["e1", "e3", "e4"]
        assert ids(
            store.slice(since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=3))
        ) == [
            "e2",
            "e3",
        ]
        assert ids(store.slice(tenant="globex", until=T0)) == []

    def test_events_until_and_open_log(self, path: Path) -> None:
        """events(until=) keeps ts <= until; open_log reads a store through Store.open."""
        with Store.init(path) as created:
            created.append(sample())
            assert [e.id for e in created.events(until=T0 + timedelta(minutes=2))] == ["e1", "e2"]
        loaded = open_log(path)
        assert len(loaded.events) == 5 and loaded.store_policy == DEFAULT_POLICY

    def test_close_checkpoints_so_the_db_file_alone_is_complete(
        self, path: Path, tmp_path: Path
    ) -> None:
        """After close, copying only the .db file keeps every committed event."""
        with Store.init(path) as created:
            created.append(sample())
        wal = Path(f"{path}-wal")
        assert not wal.exists() or wal.stat().st_size == 0
        copy = tmp_path / "copy.db"
        shutil.copyfile(path, copy)
        with Store.open(copy) as copied:
            assert len(copied) == 5 and copied.verify().ok


class TestAppendOnly:
    @pytest.mark.parametrize("table", TABLES)
    def test_triggers_refuse_update_and_delete(self, store: Store, path: Path, table: str) -> None:
        """Every table refuses UPDATE and DELETE at the schema level."""
        store.append(sample())
        conn = sqlite3.connect(path)
        column = conn.execute(f"SELECT * FROM {table}").description[0][0]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"UPDATE {table} SET {column} = {column}")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"DELETE FROM {table}")

    def test_insert_must_be_the_next_linked_position(self, store: Store, path: Path) -> None:
        """A row at a wrong position, or not linked to the head, is refused by the schema."""
        store.append(sample())
        conn = sqlite3.connect(path)
        row = list(conn.execute("SELECT * FROM events WHERE position = 5").fetchone())
        for position, prev in ((7, row[10]), (6, GENESIS_HEX)):
            bad = [position, "zz", *row[2:9], prev, "00", None]
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(f"INSERT INTO events VALUES ({','.join('?' * 12)})", bad)


class TestBusy:
    def test_lock_held_past_the_timeout_is_busy(self, store: Store, path: Path) -> None:
        """Waiting beyond the busy timeout raises StoreBusyError and stores nothing."""
        store.append(sample()[:1])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with (
                Store.open(path, busy_timeout=0.1) as waiting,
                pytest.raises(StoreBusyError, match="busy timeout"),
            ):
                waiting.append(sample()[1:])
        finally:
            other.execute("ROLLBACK")
        assert len(store) == 1


class TestMigrations:
    def test_registry_is_consecutive_from_one(self) -> None:
        assert [m.version for m in MIGRATIONS] == list(range(1, LATEST + 1))

    def test_newer_store_is_refused(self, store: Store, path: Path) -> None:
        """A store migrated by a newer gamma is refused, not guessed at."""
        conn = sqlite3.connect(path)
        conn.execute("INSERT INTO schema_version VALUES (?, 'future')", [LATEST + 1])
        conn.commit()
        with pytest.raises(StoreError, match="newer"):
            Store.open(path)

    def test_a_migration_keeps_bodies_and_heads(self, store: Store, path: Path) -> None:
        """A later migration adds schema; event rows and the chain are untouched."""
        from sqlite_utils import Database

        store.append(sample())
        before = list(sqlite3.connect(path).execute("SELECT * FROM events"))

        def add_notes(db: Database) -> None:
            db.table("notes").create({"id": int, "text": str}, pk="id")

        conn = sqlite3.connect(path, isolation_level=None)
        db = Database(conn)
        conn.execute("BEGIN IMMEDIATE")
        assert (
            migrate(db, migrations=(*MIGRATIONS, Migration(LATEST + 1, "notes", add_notes)))
            == LATEST + 1
        )
        conn.execute("COMMIT")
        assert current_version(db) == LATEST + 1
        assert list(conn.execute("SELECT * FROM events")) == before
        assert db.table("notes").exists()
        # the rows and links are intact, whatever the version says
        with pytest.raises(StoreError, match="newer"):
            Store.open(path)


def test_format_ts_matches_stored_micro_column(store: Store, path: Path) -> None:
    """ts_us sorts as instants, so fractional seconds order correctly in slices."""
    raw = lines(
        A("F1", "k", "a", ts="2026-03-01T09:00:00Z"), A("F2", "k", "b", ts="2026-03-01T09:00:00.5Z")
    )
    store.append(raw)
    got = [
        json.loads(x)["id"]
        for x in store.slice(since=datetime(2026, 3, 1, 9, 0, 0, 400000, tzinfo=UTC))
    ]
    assert got == ["e2"]
    assert format_ts(store.events()[1].ts) == "2026-03-01T09:00:00.500000Z"


# Property examples each build a store: keep them in memory-backed storage when the machine
# has it, so fsync (synchronous=FULL) costs nothing and hundreds of examples stay fast.
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


class TestAgainstTheFileReader:
    """The store and the JSONL reader agree on every valid and every malformed log."""

    @given(data=st.data())
    def test_any_log_appended_in_any_batches(self, data: st.DataObject) -> None:
        """Batches of a written log give the file's head, events and canonical lines."""
        log: Log = data.draw(logs())
        text: str = data.draw(written_jsonl(log))
        physical = text.split("\n")
        cuts = sorted(data.draw(st.lists(st.integers(0, len(physical)), max_size=3)))
        batches = [physical[a:b] for a, b in zip([0, *cuts], [*cuts, len(physical)])]
        canonical = [canonical_event(e) for e in log.events]
        with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
            path = Path(tmp) / "s.db"
            with Store.init(path, policy=log.policy) as store:
                for batch in batches:
                    store.append(batch)
                assert store.head() == head_of(canonical)
                assert list(store.export()) == canonical
                assert store.events() == log.events
                assert store.verify().ok
                assert store.append(text).appended == 0
            written = Path(tmp) / "log.jsonl"
            written.write_text(text, encoding="utf-8")
            if text:
                assert verify_file(written).head == head_of(canonical)
            else:  # a zero-byte file is neither a store nor a log (issue 11)
                with pytest.raises(InputError, match="empty"):
                    verify_file(written)

    @given(malformed_logs())
    def test_malformed_batch_fails_like_the_file_and_stores_nothing(self, bad: Malformed) -> None:
        """The same error class, line and field as parse_events; the store is left empty."""
        lines = bad.text.split("\n")
        with pytest.raises(InputError) as expected:
            parse_events(lines, policy=bad.policy)
        # the one deliberate difference: a store stamps an event written without ts
        assume(not (expected.value.field == "ts" and "missing" in expected.value.message))
        with (
            tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp,
            Store.init(Path(tmp) / "s.db", policy=bad.policy) as store,
        ):
            with pytest.raises(InputError) as got:
                store.append(lines)
            assert type(got.value) is type(expected.value)
            assert (got.value.line, got.value.field) == (expected.value.line, expected.value.field)
            assert store.head() == GENESIS_HEX and len(store) == 0


def _row_of(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[Any]]:
    cursor = conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid LIMIT 1")
    names = ["rowid", *[d[0] for d in cursor.description[1:]]]
    return names, list(cursor.fetchone())


class TestNoReplace:
    """SPEC §9.3: INSERT OR REPLACE is refused on every table, for a writer with plain sqlite3."""

    @pytest.mark.parametrize("table", TABLES)
    @pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "REPLACE"])
    def test_replace_of_a_stored_row_is_refused(self, store: Store, path: Path, table: str, verb: str) -> None:
        """REPLACE deletes the old row without firing DELETE triggers: a BEFORE INSERT trigger refuses."""
        store.append(sample())
        conn = sqlite3.connect(path)  # plain sqlite3: recursive_triggers is off
        names, row = _row_of(conn, table)
        before = list(conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid"))
        columns = [n for n in names if n != "rowid"]
        values = row[1:]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"{verb} INTO {table} ({','.join(columns)}) VALUES ({','.join('?' * len(values))})", values)
        assert list(conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid")) == before

    def test_replace_of_the_policy_digest_and_of_an_event_row(self, store: Store, path: Path) -> None:
        """The two attacks of the issue: a replaced policy_digest and an event re-inserted at the end
        under a stored id (REPLACE would have deleted the stored row)."""
        store.append(sample())
        conn = sqlite3.connect(path)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("INSERT OR REPLACE INTO store_meta VALUES ('policy_digest', ?)", ["0" * 64])
        last = list(conn.execute("SELECT * FROM events WHERE position = 5").fetchone())
        first = list(conn.execute("SELECT * FROM events WHERE position = 1").fetchone())
        forged = [6, first[1], *first[2:9], last[10], "00", None]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(f"INSERT OR REPLACE INTO events VALUES ({','.join('?' * 12)})", forged)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # by rowid, too
            conn.execute("INSERT OR REPLACE INTO store_meta (rowid, name, value) VALUES (1, 'x', 'y')")
        assert store.verify().ok and len(store) == 5

    def test_appends_still_work(self, store: Store) -> None:
        """The trigger refuses only an existing key: ordinary appends and retries go on."""
        store.append(sample())
        assert store.append(sample()).appended == 0
        assert store.append(lines(A("F9", "k", "v", id="e9", ts="2026-03-01T10:00:00Z"))).appended == 1


def _rewrite_meta(path: Path, name: str, value: str) -> None:
    """What a writer with plain sqlite3 can do: drop the trigger and change a metadata row."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS store_meta_no_update")
    conn.execute("UPDATE store_meta SET value = ? WHERE name = ?", [value, name])
    conn.close()


class TestPolicySeal:
    """SPEC §9.3: the recorded policy is under a seal verify re-derives; heads stay those of JSONL."""

    OTHER = parse_policy('[authority]\nladder = ["low", "high"]\ndefault = "low"\n')

    def test_heads_are_those_of_the_jsonl_log(self, store: Store) -> None:
        store.append(sample())
        assert store.head() == head_of(store.export())

    def test_a_changed_policy_digest_fails_verify(self, store: Store, path: Path) -> None:
        store.append(sample())
        head = store.head()
        _rewrite_meta(path, "policy_digest", "0" * 64)
        with Store.open(path) as opened:
            for report in (opened.verify(), opened.verify(expect_head=head)):
                assert not report.ok and report.kind == "policy_changed" and report.status == 1
                assert "policy" in report.verdict

    def test_a_changed_policy_with_its_digest_fails_verify(self, store: Store, path: Path) -> None:
        """Rewriting the policy and its digest together still breaks the seal."""
        store.append(sample())
        _rewrite_meta(path, "policy", canonical_json(self.OTHER.to_dict()))
        _rewrite_meta(path, "policy_digest", self.OTHER.digest)
        with Store.open(path) as opened:
            assert opened.verify().kind == "metadata_changed"
            assert opened.verify(expect_head=opened.head()).kind == "metadata_changed"
            assert "store_meta" in (opened.verify().detail or "")

    def test_a_forged_seal_is_caught_by_the_key_or_the_expected_policy(self, path: Path) -> None:
        """Whoever recomputes the plain seal is caught by the keyed seal, or by --expect-policy."""
        meta, schema = _keyed_store(path)
        forged = {**meta, "policy": canonical_json(self.OTHER.to_dict()), "policy_digest": self.OTHER.digest}
        for name in ("policy", "policy_digest"):
            _rewrite_meta(path, name, forged[name])
        _rewrite_meta(path, STORE_SEAL, store_seals(forged, schema, None)[STORE_SEAL])
        with Store.open(path, read_only=True) as opened:
            assert opened.verify().ok  # without the key or a held digest, nothing to compare with
            assert opened.verify(key=KEY).kind == "metadata_changed"
            report = opened.verify(expect_policy=DEFAULT_POLICY.digest)
            assert report.kind == "policy_changed" and DEFAULT_POLICY.digest in (report.detail or "")
            assert opened.verify(expect_policy=self.OTHER.digest).ok
        _refused_to_extend(path)

    def test_migration_seals_an_old_store_and_its_keyed_seal_is_explicit(self, tmp_path: Path) -> None:
        """A schema-2 keyed store is migrated (the REPLACE triggers, the plain seal) only in
        the transaction of an explicit ``seal`` with its key, naming the policy it vouches
        for; a writer's open leaves it as it is. Until then it neither verifies with the key
        nor takes an append, and a refused seal migrates nothing."""
        old = tmp_path / "old.db"
        _schema_2_store(old, keyed=True)
        with Store.open(old, read_only=True) as opened:  # read as it is, not migrated
            assert current_version(opened._db) == 2 and opened.verify().ok
            assert opened.verify(key=KEY).kind == "metadata_changed"
        before = _files(old)
        with Store.open(old, key=KEY) as opened:
            assert current_version(opened._db) == 2 and STORE_SEAL not in opened._read_meta()
            assert opened.verify().kind == "metadata_changed"  # the writer's key is the default
            with pytest.raises(IntegrityError, match="no keyed seal.*gamma migrate"):
                opened.append(sample())
            with pytest.raises(IntegrityError, match="not the expected"):
                opened.seal(expect_policy=self.OTHER.digest)
            assert current_version(opened._db) == 2 and len(opened) == 0
        assert _files(old) == before
        with pytest.raises(StoreError, match="the store is keyed"), Store.open(old) as opened:
            opened.seal(expect_policy=DEFAULT_POLICY.digest)  # no key: nothing is migrated
        with Store.open(old, key=KEY) as opened:
            opened.seal(expect_policy=DEFAULT_POLICY.digest)
            assert current_version(opened._db) == LATEST and STORE_SEAL in opened._read_meta()
            opened.append(sample())
            assert opened.verify(key=KEY).ok and len(opened) == 5
            assert opened.head() == head_of(opened.export())
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            sqlite3.connect(old).execute("REPLACE INTO store_meta VALUES ('policy_digest', 'x')")

    def test_a_migration_refuses_to_seal_a_changed_policy(self, tmp_path: Path) -> None:
        """A schema-3 store whose policy no longer matches its seal is not migrated (sealed)."""
        old = tmp_path / "old.db"
        _schema_2_store(old, keyed=False, upto=3)
        _rewrite_meta(old, "policy", canonical_json(self.OTHER.to_dict()))
        _rewrite_meta(old, "policy_digest", self.OTHER.digest)
        with pytest.raises(IntegrityError, match="refusing to migrate"):
            Store.open(old)
        with Store.open(old, read_only=True) as opened:
            assert opened.verify().kind == "metadata_changed"


def _keyed_store(path: Path) -> tuple[dict[str, str], list[tuple[int, str]]]:
    """A keyed store with the sample; its metadata and schema rows."""
    with Store.init(path, key=KEY) as created:
        created.append(sample())
        return created._read_meta(), schema_rows(created._db)


def _schema_2_store(path: Path, *, keyed: bool, upto: int = 2) -> None:
    """A store as gamma wrote it at schema ``upto`` (no seal at 2, the policy seal at 3)."""
    from sqlite_utils import Database

    from gamma.storage.store import _key_check

    conn = sqlite3.connect(path, isolation_level=None)
    db = Database(conn)
    conn.execute("BEGIN IMMEDIATE")
    migrate(db, migrations=MIGRATIONS[:2])
    meta = {"format": "gamma-store", "policy": canonical_json(DEFAULT_POLICY.to_dict()),
            "policy_digest": DEFAULT_POLICY.digest, "keyed": "true" if keyed else "false"}
    if keyed:
        meta["key_check"] = _key_check(KEY)
    db.table("store_meta").insert_all([{"name": k, "value": v} for k, v in sorted(meta.items())])
    migrate(db, migrations=MIGRATIONS[:upto])
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode=wal")
    conn.close()


def _files(path: Path) -> list[bytes]:
    """The bytes of a store and of its WAL (an empty WAL is none: SQLite removes an empty
    one when the last connection closes)."""
    wal = Path(f"{path}-wal")
    return [path.read_bytes(), wal.read_bytes() if wal.exists() else b""]


def _refused_to_extend(path: Path) -> None:
    """The honest key holder's next append is refused and leaves every byte of the store and
    of its WAL as they were (a keyed store is not even migrated by it)."""
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    before = _files(path)
    with pytest.raises(IntegrityError, match="does not verify|refusing to migrate"):
        with Store.open(path, key=KEY) as opened:
            opened.append(lines(A("F9", "k9", "v9", id="e99", ts="2026-03-02T00:00:00Z")))
    assert _files(path) == before
    with Store.open(path, read_only=True) as reader:
        assert reader.verify(key=KEY).kind == "metadata_changed"


class TestKeyedSealAttacks:
    """Issue 26 part 2: the key holder is honest, the attacker edits the file. Whatever they
    do to the metadata, verify with the key fails and the next honest append is refused."""

    OTHER = TestPolicySeal.OTHER

    def forge(self, path: Path, *, drop: tuple[str, ...], versions: int | None = None,
              unkeyed: bool = False) -> None:
        """Rewrite the policy (and the keyed flag), drop rows, lower the schema version, and
        recompute every plain seal the store still shows, as an attacker without the key."""
        conn = sqlite3.connect(path, isolation_level=None)
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        meta = {str(k): str(v) for k, v in conn.execute("SELECT name, value FROM store_meta")}
        meta.update(policy=canonical_json(self.OTHER.to_dict()), policy_digest=self.OTHER.digest)
        if unkeyed:
            meta["keyed"] = "false"
            meta.pop("key_check")
        for name in drop:
            meta.pop(name, None)
        if versions is not None:
            conn.execute("DELETE FROM schema_version WHERE version > ?", [versions])
        schema = [(int(v), str(n)) for v, n in conn.execute("SELECT version, name FROM schema_version ORDER BY version")]
        if STORE_SEAL in meta:
            meta[STORE_SEAL] = store_seals(meta, schema, None)[STORE_SEAL]
        if SEAL in meta:
            meta[SEAL] = seal_rows(meta, None)[SEAL]
        conn.execute("DELETE FROM store_meta")
        conn.executemany("INSERT INTO store_meta VALUES (?, ?)", sorted(meta.items()))
        conn.close()

    @pytest.mark.parametrize(
        ("drop", "versions", "unkeyed"),
        [
            ((STORE_SEAL, STORE_KEYED_SEAL), None, False),  # delete the seal rows
            ((STORE_KEYED_SEAL,), None, False),  # keep the plain seal, delete the keyed one
            ((STORE_SEAL, STORE_KEYED_SEAL), 3, False),  # lower schema_version to 3
            ((STORE_SEAL, STORE_KEYED_SEAL), 2, False),  # ... to 2 (before any seal)
            ((STORE_KEYED_SEAL,), None, True),  # flip the keyed flag, delete key_check
            ((STORE_SEAL, STORE_KEYED_SEAL), 2, True),
            # the repro: every seal row deleted, schema_version lowered to 2 (a writer then
            # migrated it and sealed the forged policy plainly)
            ((STORE_SEAL, STORE_KEYED_SEAL, SEAL, KEYED_SEAL), 2, False),
        ],
    )
    def test_a_rewritten_store_fails_verify_with_the_key_and_takes_no_append(
        self, path: Path, drop: tuple[str, ...], versions: int | None, unkeyed: bool
    ) -> None:
        _keyed_store(path)
        self.forge(path, drop=drop, versions=versions, unkeyed=unkeyed)
        with Store.open(path, read_only=True) as opened:
            report = opened.verify(key=KEY)
            assert not report.ok and report.status == 1, report
            assert report.kind == "metadata_changed"
        if unkeyed:  # the honest writer's key is refused by a store that now says it is unkeyed
            with pytest.raises(StoreError, match="initialised without one"), Store.open(path, key=KEY) as w:
                w.append(sample())
        else:
            _refused_to_extend(path)
        with Store.open(path, read_only=True) as opened:
            assert opened.verify(key=KEY).kind == "metadata_changed"  # nothing was re-sealed
            assert STORE_KEYED_SEAL not in opened._read_meta() or not drop

    def test_an_inserted_metadata_row_breaks_the_seal(self, path: Path) -> None:
        _keyed_store(path)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("INSERT INTO store_meta VALUES ('extra', 'x')")
        conn.close()
        with Store.open(path, read_only=True) as opened:
            assert opened.verify().kind == "metadata_changed"

    def test_an_unkeyed_store_verified_with_a_key_says_not_keyed(self, tmp_path: Path) -> None:
        with Store.init(tmp_path / "u.db") as created:
            created.append(sample())
            assert created.verify(key=KEY).verdict == "not keyed"


def _digests(directory: Path) -> dict[str, bytes]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).digest() for p in sorted(directory.iterdir())
            if not p.name.endswith("-shm")}


_KILLED_WRITER = """
import os, sys
from gamma.storage.store import Store
store = Store.open(sys.argv[1])
store.append(sys.stdin.read())
os._exit(0)  # killed: no close, no checkpoint; the commit sits in the WAL
"""


class TestReadOnly:
    """SPEC §9.6: reading commands open stores read-only; verify changes no byte of the evidence."""

    def killed_writer(self, path: Path) -> None:
        import subprocess
        import sys

        with Store.init(path) as created:
            created.append(sample()[:2])
        more = "\n".join(sample()[2:])
        subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], input=more, text=True, check=True)
        assert Path(f"{path}-wal").stat().st_size > 0

    def test_verify_leaves_a_killed_writers_wal_alone(self, tmp_path: Path) -> None:
        """The WAL's commits are read (5 events) but never checkpointed into the file."""
        path = tmp_path / "s.db"
        self.killed_writer(path)
        before = _digests(tmp_path)
        from gamma.storage.sources import verify_path

        report = verify_path(path)
        assert report.ok and report.events == 5
        assert _digests(tmp_path) == before
        assert len(open_log(path).events) == 5
        assert _digests(tmp_path) == before

    def test_read_only_store_refuses_append(self, store: Store, path: Path) -> None:
        store.append(sample())
        with Store.open(path, read_only=True) as opened:
            assert len(opened) == 5
            with pytest.raises(StoreError, match="read-only"):
                opened.append(lines(A("F9", "k", "v", id="e9")))

    def test_reading_an_old_schema_does_not_migrate(self, tmp_path: Path) -> None:
        from sqlite_utils import Database

        old = tmp_path / "old.db"
        conn = sqlite3.connect(old, isolation_level=None)
        db = Database(conn)
        conn.execute("BEGIN IMMEDIATE")
        migrate(db, migrations=MIGRATIONS[:2])
        db.table("store_meta").insert_all([
            {"name": "format", "value": "gamma-store"}, {"name": "keyed", "value": "false"},
            {"name": "policy", "value": canonical_json(DEFAULT_POLICY.to_dict())},
            {"name": "policy_digest", "value": DEFAULT_POLICY.digest}])
        conn.execute("COMMIT")
        conn.close()
        before = old.read_bytes()
        with Store.open(old, read_only=True) as opened:
            assert opened.verify().ok and current_version(opened._db) == 2
        assert old.read_bytes() == before


@given(log_=logs(max_size=10), cut=st.integers(min_value=0, max_value=12))
def test_a_full_read_carries_the_heads_of_what_it_returns(log_: Log, cut: int) -> None:
    """Γ takes a store read's heads as they are, so they must be the events' own: the chain
    head and the tree head of exactly the events returned (all of them, or those by ``until``)."""
    from gamma.core.integrity.merkle import tree_head_of
    from gamma.core.reading.parsed import ParsedLog

    with tempfile.TemporaryDirectory() as tmp:
        with Store.init(Path(tmp) / "s.db", policy=log_.policy) as written:
            written.append([json.dumps(line) for line in log_.lines])
            events = parse_events([json.dumps(line) for line in log_.lines], policy=log_.policy)
            until = events[min(cut, len(events) - 1)].ts if events and cut < len(events) else None
            read = written.events(until=until)
    assert isinstance(read, ParsedLog) and read.heads is not None
    texts = [canonical_event(event) for event in read]
    assert read.heads == (head_of(texts), tree_head_of(texts))


def test_gamma_migrate_seals_an_old_keyed_store(tmp_path: Path) -> None:
    """``gamma migrate`` (gamma.cli.store.migrate_command): the keyed seal, only with the key
    and the policy digest vouched for; then appends go on."""
    from click.testing import CliRunner

    from gamma.cli.store import migrate_command

    old = tmp_path / "old.db"
    _schema_2_store(old, keyed=True)
    key_file = tmp_path / "k.key"
    key_file.write_bytes(KEY)
    runner = CliRunner()
    refused = runner.invoke(migrate_command, [str(old), "--key-file", str(key_file)])
    assert refused.exit_code != 0 and "--expect-policy" in str(refused.exception or refused.output)
    done = runner.invoke(migrate_command, [str(old), "--key-file", str(key_file),
                                           "--expect-policy", DEFAULT_POLICY.digest])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output.splitlines()[0]) == {"keyed_seal": True, "policy": DEFAULT_POLICY.digest,
                                       "schema_version": LATEST}
    with Store.open(old, key=KEY) as opened:
        opened.append(sample())
        assert opened.verify(key=KEY).ok
