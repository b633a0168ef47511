"""The store's schema, as an ordered registry of migrations.

Each migration moves the schema from ``version - 1`` to ``version`` and is
recorded in ``schema_version`` in the same transaction as its changes. A
migration may add tables, columns, indexes and triggers; it never rewrites an
event body, a head or a position, because those are what the chain covers.
The registry is an explicit tuple so a reviewer reads the whole schema
history in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import attrs
from sqlite_utils import Database

from gamma.core.integrity.merkle import CompactRange
from gamma.core.terms.errors import IntegrityError, StoreError
from gamma.storage.seal import (
    SEAL,
    STORE_KEYED_SEAL,
    STORE_SEAL,
    seal_problem,
    seal_rows,
    store_seals,
)
from gamma.storage.tree import tree_rows

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "TABLES",
    "VALUE_TABLES",
    "Migration",
    "current_version",
    "from_micros",
    "migrate",
    "schema_rows",
    "ts_micros",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def ts_micros(value: datetime) -> int:
    """The ``ts_us`` column: an instant as integer microseconds since the epoch (sorts as time)."""
    return (value - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return _EPOCH + value * _MICROSECOND


_V1_TABLES = ("events", "store_meta", "schema_version")
TABLES = (*_V1_TABLES, "tree")
"""The tables of schemas 1 to 4; each refuses UPDATE, DELETE and (from schema 3) REPLACE."""
VALUE_TABLES = ("event_values", "erasures")
"""The tables of schema 5 (committed values, issue 30): append-only too, except that a value
row is deleted once an ``erasures`` row holds its position."""


@attrs.frozen
class Migration:
    """One schema step: ``apply`` runs inside the caller's write transaction."""

    version: int
    name: str
    apply: Callable[[Database], None]


def _append_only(db: Database, table: str) -> None:
    for verb in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'gamma store is append-only: {verb} on {table} refused'); END"
        )


def _v1_create(db: Database) -> None:
    """Events with their chain links and lookup columns; metadata; append-only triggers."""
    db.table("events").create(
        {
            "position": int,  # 1-based place in the log; INTEGER PRIMARY KEY (the rowid)
            "id": str,
            "type": str,
            "tenant": str,
            "ts_us": int,  # ts as microseconds since the Unix epoch (sorts as instants)
            "fact": str,
            "key": str,
            "experience": str,
            "body": str,  # the canonical event, the bytes the chain covers
            "prev_head": str,  # hex head before this event (64 zeros for the first)
            "head": str,  # hex sha256(prev_head || body)
            "keyed_head": str,  # hex HMAC chain head, NULL in an unkeyed store
        },
        pk="position",
        not_null=["id", "type", "tenant", "ts_us", "body", "prev_head", "head"],
        strict=True,
    )
    db.table("events").create_index(["id"], index_name="events_id", unique=True)
    db.table("events").create_index(["tenant", "position"], index_name="events_tenant")
    db.table("events").create_index(["ts_us"], index_name="events_ts")
    # partial indexes: uniqueness of fact ids among asserts and of experience ids
    db.execute("CREATE UNIQUE INDEX events_asserted_fact ON events(fact) WHERE type = 'assert'")
    db.execute(
        "CREATE UNIQUE INDEX events_experience ON events(experience) WHERE type = 'experience'"
    )
    db.execute("CREATE INDEX events_key ON events(key) WHERE key IS NOT NULL")
    # the code appends each event as the next one; the schema checks it again
    db.execute(
        "CREATE TRIGGER events_in_order BEFORE INSERT ON events "
        "WHEN NEW.position IS NOT coalesce((SELECT max(position) FROM events), 0) + 1 "
        "OR NEW.prev_head IS NOT coalesce("
        "(SELECT head FROM events WHERE position = NEW.position - 1), printf('%064d', 0)) "
        "BEGIN SELECT RAISE(ABORT, "
        "'gamma store is append-only: an event must be the next position, linked to the head'); END"
    )
    db.table("store_meta").create(
        {"name": str, "value": str}, pk="name", not_null=["value"], strict=True
    )
    for table in _V1_TABLES:
        _append_only(db, table)


def _v2_tree(db: Database) -> None:
    """The Merkle tree (gamma.storage.tree): one row of subtree roots per event, built for the log."""
    db.table("tree").create({"position": int, "hashes": bytes}, pk="position", not_null=["hashes"],
                            strict=True)
    db.execute(
        "CREATE TRIGGER tree_in_order BEFORE INSERT ON tree "
        "WHEN NEW.position IS NOT coalesce((SELECT max(position) FROM tree), 0) + 1 "
        "BEGIN SELECT RAISE(ABORT, 'gamma store is append-only: a tree row must be the next position'); END"
    )
    _append_only(db, "tree")
    bodies = (str(body) for (body,) in db.execute("SELECT body FROM events ORDER BY position"))
    rows = tree_rows(CompactRange(), bodies)
    if rows:
        db.table("tree").insert_all(iter([["position", "hashes"], *rows]), batch_size=500)


#: For each table, what makes a row "the same" as a stored one: INSERT OR REPLACE would delete
#: that row first, and SQLite fires no DELETE trigger for it (unless a connection turns
#: recursive_triggers on), so a BEFORE INSERT trigger refuses an existing key instead.
#: Each test is its own EXISTS so that it uses its index.
_KEYS = {
    "events": (
        "EXISTS (SELECT 1 FROM events WHERE position = NEW.position)",
        "EXISTS (SELECT 1 FROM events WHERE id = NEW.id)",
        "(NEW.type = 'assert' AND EXISTS (SELECT 1 FROM events WHERE type = 'assert' AND fact = NEW.fact))",
        "(NEW.type = 'experience' AND EXISTS"
        " (SELECT 1 FROM events WHERE type = 'experience' AND experience = NEW.experience))",
    ),
    "store_meta": (
        "EXISTS (SELECT 1 FROM store_meta WHERE name = NEW.name)",
        "EXISTS (SELECT 1 FROM store_meta WHERE rowid = NEW.rowid)",
    ),
    "schema_version": ("EXISTS (SELECT 1 FROM schema_version WHERE version = NEW.version)",),
    "tree": ("EXISTS (SELECT 1 FROM tree WHERE position = NEW.position)",),
}


def _v3_no_replace(db: Database) -> None:
    """Refuse INSERT OR REPLACE on every table, and seal the recorded policy (gamma.storage.seal)."""
    for table in TABLES:
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_replace BEFORE INSERT ON {table} "
            f"WHEN {' OR '.join(_KEYS[table])} "
            f"BEGIN SELECT RAISE(ABORT, 'gamma store is append-only: a row of {table} with this key"
            " exists (INSERT OR REPLACE refused)'); END"
        )
    meta = {str(name): str(value) for name, value in db.execute("SELECT name, value FROM store_meta")}
    if meta and SEAL not in meta:  # a store being created gets its seal from Store.init
        db.table("store_meta").insert({"name": SEAL, "value": seal_rows(meta, None)[SEAL]})


_V4_NAME = "seal every metadata row and the schema version"


def _v4_store_seal(db: Database) -> None:
    """Seal all metadata and the schema version (gamma.storage.seal): the plain seal only.

    What schema 3 sealed must still verify, or nothing is sealed: a migration never seals
    what it cannot check. No key is at hand here, so a keyed store gets its keyed seal
    only from ``Store.seal`` (``gamma migrate``), asked for explicitly.
    """
    meta = {str(name): str(value) for name, value in db.execute("SELECT name, value FROM store_meta")}
    if not meta or STORE_SEAL in meta:  # a store being created gets its seals from Store.init
        return
    schema = schema_rows(db)
    problem = seal_problem(meta, schema, None)
    if problem is not None:
        raise IntegrityError(f"refusing to migrate the store to schema 4: {problem[1]}")
    sealed = store_seals(meta, [*schema, (4, _V4_NAME)], None)
    db.table("store_meta").insert({"name": STORE_SEAL, "value": sealed[STORE_SEAL]})


_V5_NAME = "committed values and their erasures"


def _v5_values(db: Database) -> None:
    """The values a committed store keeps beside its chain, and the erasures that deleted some.

    ``event_values`` holds, per assert position, the salt and the canonical JSON of the value
    its body commits to; ``erasures`` names each erased fact, its position and the position of
    the erase event. Both refuse UPDATE and REPLACE; ``erasures`` refuses DELETE, and a value
    row may be deleted only once an ``erasures`` row holds its position (the erase event's
    transaction inserts that row first). A value is never written for an erased position, and
    only for an assert. The schema version is sealed (schema 4), so the seal is renewed here,
    and only if it verifies first; a keyed seal, which no migration can renew without the key,
    is dropped here and written again by ``Store.seal`` in the same transaction.
    """
    db.execute(
        "CREATE TABLE IF NOT EXISTS event_values (position INTEGER PRIMARY KEY, salt TEXT NOT NULL,"
        " value TEXT NOT NULL) STRICT"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS erasures (position INTEGER PRIMARY KEY, fact TEXT NOT NULL UNIQUE,"
        " erase_position INTEGER NOT NULL) STRICT"
    )
    for table in VALUE_TABLES:
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} BEGIN SELECT RAISE(ABORT,"
            f" 'gamma store is append-only: UPDATE on {table} refused'); END"
        )
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_replace BEFORE INSERT ON {table} WHEN EXISTS (SELECT 1"
            f" FROM {table} WHERE position = NEW.position) BEGIN SELECT RAISE(ABORT, 'gamma store"
            f" is append-only: a row of {table} with this key exists (INSERT OR REPLACE refused)');"
            " END"
        )
    db.execute(
        "CREATE TRIGGER IF NOT EXISTS erasures_no_delete BEFORE DELETE ON erasures BEGIN SELECT RAISE(ABORT,"
        " 'gamma store is append-only: DELETE on erasures refused'); END"
    )
    db.execute(
        "CREATE TRIGGER IF NOT EXISTS event_values_no_delete BEFORE DELETE ON event_values WHEN NOT EXISTS"
        " (SELECT 1 FROM erasures WHERE position = OLD.position) BEGIN SELECT RAISE(ABORT,"
        " 'gamma store is append-only: a value is deleted only by its erasure'); END"
    )
    db.execute(
        "CREATE TRIGGER IF NOT EXISTS event_values_of_asserts BEFORE INSERT ON event_values WHEN NOT EXISTS"
        " (SELECT 1 FROM events WHERE position = NEW.position AND type = 'assert') OR EXISTS"
        " (SELECT 1 FROM erasures WHERE position = NEW.position) BEGIN SELECT RAISE(ABORT,"
        " 'gamma store is append-only: a value row is written for a stored assert, never for"
        " an erased one'); END"
    )
    db.execute(
        "CREATE TRIGGER IF NOT EXISTS erasures_by_erase BEFORE INSERT ON erasures WHEN NOT EXISTS (SELECT 1"
        " FROM events WHERE position = NEW.erase_position AND type = 'erase') OR NOT EXISTS"
        " (SELECT 1 FROM events WHERE position = NEW.position AND type = 'assert' AND fact ="
        " NEW.fact) BEGIN SELECT RAISE(ABORT, 'gamma store is append-only: an erasure names a"
        " stored assert and the erase event that erased it'); END"
    )
    _renew_seal(db, (5, _V5_NAME))


def _renew_seal(db: Database, step: tuple[int, str]) -> None:
    """Seal the store again for the schema version ``step`` adds, if the seal of the version
    before verifies: a migration never seals what it cannot check, so a seal that does not
    verify is left as it is (verify names it, and no writer extends the store). A store being
    created gets its seals from ``Store.init``; one older than schema 4 was sealed by
    migration 4 just before. The seal rows are the one place a migration replaces a row: the
    trigger that refuses it is dropped and made again inside this transaction."""
    meta = {str(name): str(value) for name, value in db.execute("SELECT name, value FROM store_meta")}
    if STORE_SEAL not in meta:
        return
    schema = schema_rows(db)
    sealed = store_seals(meta, [*schema, step], None)
    if sealed[STORE_SEAL] == meta[STORE_SEAL]:
        return  # sealed for this schema already
    if seal_problem(meta, schema, None) is not None:
        return  # never sealed anew: verify names it, and no writer extends it (check_extendable)
    db.execute("DROP TRIGGER IF EXISTS store_meta_no_delete")
    db.execute("DELETE FROM store_meta WHERE name IN (?, ?)", [STORE_SEAL, STORE_KEYED_SEAL])
    _append_only_delete(db, "store_meta")
    db.table("store_meta").insert({"name": STORE_SEAL, "value": sealed[STORE_SEAL]})


def _append_only_delete(db: Database, table: str) -> None:
    db.execute(
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, 'gamma store is append-only: DELETE on {table} refused'); END"
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "create events, metadata and triggers", _v1_create),
    Migration(2, "Merkle tree of the log", _v2_tree),
    Migration(3, "refuse INSERT OR REPLACE; seal the recorded policy", _v3_no_replace),
    Migration(4, _V4_NAME, _v4_store_seal),
    Migration(5, _V5_NAME, _v5_values),
)
"""The schema history, oldest first; versions are consecutive from 1."""

LATEST = MIGRATIONS[-1].version


def current_version(db: Database) -> int:
    """The store's schema version (0 for an empty file)."""
    if not db.table("schema_version").exists():
        return 0
    row = db.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def schema_rows(db: Database) -> list[tuple[int, str]]:
    """The ``schema_version`` rows as ``(version, name)``, in version order (none: [])."""
    if not db.table("schema_version").exists():
        return []
    rows = db.execute("SELECT version, name FROM schema_version ORDER BY version")
    return [(int(version), str(name)) for version, name in rows]


def migrate(db: Database, *, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Apply the pending migrations inside the caller's write transaction; return the version.

    A store newer than this gamma is refused rather than guessed at.
    """
    if not db.table("schema_version").exists():
        db.table("schema_version").create(
            {"version": int, "name": str}, pk="version", not_null=["name"], strict=True
        )
    version = current_version(db)
    latest = migrations[-1].version if migrations else 0
    if version > latest:
        raise StoreError(
            f"store schema version {version} is newer than this gamma knows ({latest}): upgrade gamma"
        )
    for step in migrations:
        if step.version <= version:
            continue
        if step.version != version + 1:
            raise StoreError(f"migration registry skips from version {version} to {step.version}")
        step.apply(db)
        db.table("schema_version").insert({"version": step.version, "name": step.name})
        version = step.version
    return version
