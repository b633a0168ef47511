"""The explicit migration of a plaintext store to committed values (issue 30, SPEC §21).

A plaintext store's chain hashes every value, so no value of it can ever be erased without
breaking every head and proof. ``migrate_to_committed(old, new)`` writes a new store that
commits to values: every event of OLD at its position, each assert under a fresh salt, then one
``migrate`` event naming OLD's head, tree size and root, which ties the new log to the old one's
checkpoints. OLD is only read (and verified first: a migration never carries a tampered log
over), so its heads and roots stay checkable against it. Never done silently: only this call
(``gamma migrate OLD --commit-values --to NEW``) does it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from gamma.core.terms.errors import InputError, IntegrityError, StoreError, ValueTypeError
from gamma.storage.store import Store

__all__ = ["MigrateResult", "migrate_to_committed"]


@attrs.frozen
class MigrateResult:
    """What the migration wrote: NEW's events and head, and what its ``migrate`` event names."""

    event: str
    events: int
    head: str
    from_head: str
    from_root: str
    from_size: int

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "events": self.events, "from_head": self.from_head,
                "from_root": self.from_root, "from_size": self.from_size, "head": self.head}


def migrate_to_committed(
    old: str | Path,
    new: str | Path,
    *,
    key: bytes | None = None,
    actor: str = "gamma",
    tenant: str = "gamma",
    event_id: str | None = None,
    now: datetime | None = None,
) -> MigrateResult:
    """Write NEW, a store that commits to values, from the plaintext store OLD (SPEC §21).

    NEW records OLD's policy and is keyed with ``key`` when OLD is (the same chain key reads
    OLD and keys NEW). Every event keeps its position and its fields; an assert gets a fresh
    salt; the last event is a ``migrate`` event of ``actor`` and ``tenant`` naming OLD's head,
    its tree size and root. NEW must be a new or empty file, OLD a plaintext store that
    verifies; either error leaves both as they were. NEW is written in one transaction after
    its creation; if that fails, NEW is removed.
    """
    old, new = Path(old), Path(new)
    if new.exists() and old.exists() and new.resolve() == old.resolve():
        raise InputError("the new store must be another file than the old one", field="to")
    if new.exists() and new.stat().st_size > 0:
        raise InputError("refusing to migrate into an existing file: give a new path",
                         source=str(new), field="to")
    with Store.open(old, read_only=True, key=key) as source:
        if key is None and source.claims_keyed:
            raise StoreError(f"{old}: the store is keyed: give its chain key (it verifies OLD"
                             " and keys NEW)")
        if source.committed:
            raise ValueTypeError("the store commits to its values already: nothing to migrate",
                                 source=str(old))
        report = source.verify(key=key)
        if not report.ok:
            raise IntegrityError(f"{old}: refusing to migrate a store that does not verify:"
                                 f" {report.verdict}: {report.detail}")
        lines = list(source.export())
        last = source.events()[-1].ts if lines else None
        head, tree, policy = source.head(), source.tree_head(), source.policy
    seed = f"{head}:{tree.size}:{tree.root}".encode()
    event: dict[str, Any] = {
        "type": "migrate", "actor": actor, "tenant": tenant,
        "id": event_id or "migrate-" + hashlib.sha256(seed).hexdigest()[:24],
        "from_head": head, "from_root": tree.root, "from_size": tree.size,
    }
    clock = (now or datetime.now(UTC)).astimezone(UTC)
    if last is not None and last > clock:  # the old log's own times, never refused as ahead
        clock = last
    created = False
    try:
        with Store.init(new, policy=policy, key=key, commit_values=True) as target:
            created = True
            result = target.append([*lines, event], now=clock, source=str(old))
    except BaseException:
        if created:
            for path in (new, Path(f"{new}-wal"), Path(f"{new}-shm")):
                path.unlink(missing_ok=True)
        raise
    return MigrateResult(event=str(event["id"]), events=result.events, head=result.head,
                         from_head=head, from_root=tree.root, from_size=tree.size)
