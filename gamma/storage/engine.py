"""``gamma.Engine``: Γ kept open over a growing log, in memory or backed by a store.

The in-memory state (validated events, the validation index, chain heads,
per-tenant folds) is ``gamma.core.incremental.engine.EngineState``; this class adds the
sources: a JSONL file read once, or a store whose new rows ``refresh`` reads
(and only those), and to which ``append`` writes in the batch semantics of
``Store.append``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from threading import RLock
from types import TracebackType
from typing import Self

from gamma.core.incremental.engine import Batch, Decision, EngineState
from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.events import check_names
from gamma.core.reading.reader import read
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.errors import InputError, StoreError
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import Policy
from gamma.face import checked
from gamma.storage.store import AppendResult, EraseResult, Store, is_store

__all__ = ["Engine"]


class Engine:
    """An open, growing log with Γ's fold state kept between calls.

    ``Engine()`` starts empty, in memory; ``Engine.open(path)`` reads a JSONL
    log or opens a store (its recorded policy unless ``policy`` is given, in
    which case every stored event must name levels on that policy's ladders).
    Every ``resolve`` equals ``gamma.resolve`` over all events in the engine,
    byte for byte.

    One engine may be shared by threads. Every public call runs whole under one
    re-entrant lock: appends and refreshes are serialised (a store's write and the read
    of its new rows included), and a read never sees part of an append, so each call
    answers as it would in some serial order of the calls, the order of the lock. Reads
    wait for one another too (a read advances the folds and per-class results it shares
    with every other read); a returned ``Resolution`` is immutable, so rendering and
    encoding it run in parallel with other calls. Over a store, the store's write and the
    read of its new rows are one step under the lock, but SQLite binds the connection to
    the thread that opened the engine: only that thread may ``append``, ``refresh`` or
    ``close``; any thread may read.
    """

    # each public method checks its arguments' types at the door (gamma.face): a str actor or
    # a dict batch is a TypeError naming the parameter, never an AttributeError from inside
    @checked
    def __init__(self, policy: Policy | None = None) -> None:
        self._state = EngineState(policy)
        self._store: Store | None = None
        self._store_policy: Policy | None = None
        self._read_at: tuple[int, int] | None = None  # the store's ``changes`` at the last read

    @classmethod
    @checked
    def open(
        cls, source: str | Path, *, policy: Policy | None = None, key: bytes | None = None
    ) -> Engine:
        """An engine over a JSONL file (read once) or a store (read now, and on ``refresh``)."""
        path = Path(source)
        if not path.exists():
            raise InputError("no such file", source=str(path))
        if not is_store(path):
            engine = cls(policy)
            engine._state.extend(read(Path(path), policy=engine.policy))
            return engine
        store = Store.open(path, key=key)
        try:
            engine = cls(policy or store.policy)
            engine._store, engine._store_policy = store, store.policy
            engine.refresh()
        except BaseException:
            store.close()
            raise
        return engine

    @property
    def policy(self) -> Policy:
        return self._state.policy

    @property
    def lock(self) -> RLock:
        """The engine's re-entrant lock, which every call holds: a thread holding it makes
        several calls one step (a position read and a resolve at that position, say)."""
        return self._state.lock

    @property
    def state(self) -> EngineState:
        """The in-memory state behind the public methods, past their argument checks (~50 µs a
        call): for a caller that has validated its arguments itself (``gamma serve``'s
        handlers). Its ``resolve`` and ``check`` answer as the engine's do."""
        return self._state

    @property
    def head(self) -> str:
        """The chain head after the last event in the engine."""
        return self._state.head

    @property
    def tree_head(self) -> TreeHead:
        """The Merkle tree head of every event in the engine (what a checkpoint signs)."""
        return self._state.tree_head

    @property
    def events(self) -> tuple[Event, ...]:
        """Every event in the engine, in log order."""
        return self._state.since(0)

    def __len__(self) -> int:
        return len(self._state)

    def events_since(self, position: int) -> tuple[Event, ...]:
        """The events after the first ``position``, in log order (only those are copied)."""
        return self._state.since(position)

    @checked
    def append(self, events: Batch, *, source: str = "<append>") -> AppendResult:
        """Validate a batch against everything in the engine and take all of it or none of it.

        Items are JSON lines (a str is split into lines), objects or events.
        Backed by a store, the batch goes to the store first (``Store.append``:
        a missing ``ts`` is stamped, a retried identical event skipped), then
        the engine reads what the store now holds, other writers' rows included.
        """
        if self._store is None:
            appended, position, head = self._state.take(events, source=source)
            return AppendResult(appended=appended, events=position, head=head)
        with self._state.lock:  # the store's write and the engine's read of it, together
            stored = self._store.append(events, source=source)
            self.refresh()
            return AppendResult(appended=stored.appended, events=len(self._state), head=self.head)

    @checked
    def erase(
        self,
        *,
        tenant: str,
        basis: str,
        actor: str,
        facts: Iterable[str] | None = None,
        key: str | None = None,
        subject: str | None = None,
        all_of_tenant: bool = False,
        event_id: str | None = None,
    ) -> EraseResult:
        """Erase committed values of the store (``Store.erase``, SPEC §21), then take the erase
        event in: the values and salts it names leave everything the engine keeps.

        For the host only: no agent surface offers it. ``actor`` must hold the policy's erasure
        authority; erasing needs an engine over a store made with ``commit_values``.
        """
        if self._store is None:
            raise StoreError("erasure needs an engine over a store (one made with commit_values):"
                             " an engine in memory or over a JSONL file keeps no values apart")
        with self._state.lock:  # the store's erase and the engine's read of it, together
            result = self._store.erase(tenant=tenant, basis=basis, actor=actor, facts=facts,
                                       key=key, subject=subject, all_of_tenant=all_of_tenant,
                                       event_id=event_id)
            self.refresh()
            return result

    def refresh(self) -> int:
        """Fold what other writers appended to the store since; returns how many events came in.

        Only the new rows are read, checked against the head and index the
        engine holds (an IntegrityError names the position), never re-validated.
        An erase among them (another process's ``gamma erase``) takes the values it names
        out of everything the engine keeps. An engine not backed by a store has nothing
        to refresh.
        """
        if self._store is None:
            return 0
        with self._state.lock:  # two refreshes must not both take the same new rows
            changes = self._store.changes()
            if changes == self._read_at:  # nothing committed since the last read: no read
                return 0
            since = len(self._state)
            events, heads = self._store.read(since=since, prev=self.head, index=self._state.index)
            if self.policy != self._store_policy:
                # the store validated these against its own policy, not this one
                check_names(events, self.policy, source=f"{self._store.path} (event position)")
            self._state.extend(events, heads=heads)
            self._read_at = changes  # only once taken: a read that failed is tried again
            return len(events)

    @checked
    def resolve(
        self,
        actor: Actor | Mapping[str, object],
        at: datetime | str,
        *,
        keys: Iterable[str] | None = None,
    ) -> Resolution:
        """Γ(H, A, t) over every event in the engine; ``keys`` keeps only those keys' facts."""
        return self._state.resolve(actor, at, keys=keys)

    @checked
    def check(
        self, actor: Actor | Mapping[str, object], at: datetime | str, facts: Iterable[str]
    ) -> dict[str, Decision]:
        """One decision per fact id, exactly as ``resolve`` would give it."""
        return self._state.check(actor, at, facts)

    def close(self) -> None:
        if self._store is not None:
            with self._state.lock:  # not under a call of another thread
                self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
