"""The store against a plain in-memory model, under random interleavings of operations.

The model is the list of events the store must hold, as written. Appends (valid batches,
batches carrying one malformation, retries of stored events, events without ``ts``),
exports, verifies, reopenings and resolutions run in any order; after every step the
store's head, length and chain must match the model's.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from strategies import Log, actors, extensions, malformed_logs, policies, probe_times

import gamma
from gamma.core.integrity.chain import head_of
from gamma.core.terms.canonical import canonical_json, format_ts, parse_ts
from gamma.storage.store import Store

KEY = b"a key of at least sixteen bytes"


class StoreMachine(RuleBasedStateMachine):
    """gamma.Store, step by step, against the list of events it must hold."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="gamma-stateful-"))
        self.path = self.directory / "events.db"
        self.store: Store | None = None
        self.lines: list[dict[str, Any]] = []
        self.key: bytes | None = None
        self.policy = gamma.DEFAULT_POLICY

    # -- the model ------------------------------------------------------------------------

    def log(self) -> Log:
        return Log.of(self.lines, self.policy)

    def model_head(self) -> str:
        return head_of(canonical_json(line) for line in self.lines)

    def open_store(self) -> Store:
        assert self.store is not None
        return self.store

    # -- rules ----------------------------------------------------------------------------

    @initialize(policy=policies(), keyed=st.booleans())
    def create(self, policy: gamma.Policy, keyed: bool) -> None:
        self.policy = policy
        self.key = KEY if keyed else None
        self.store = Store.init(self.path, policy=policy, key=self.key)

    @rule(data=st.data(), as_objects=st.booleans())
    def append_a_valid_batch(self, data: st.DataObject, as_objects: bool) -> None:
        """A valid batch is stored whole; the result counts it and names the new head."""
        batch = data.draw(extensions(self.log(), min_size=1, max_size=4), label="batch")
        items: Any = list(batch.lines) if as_objects else batch.text()
        result = self.open_store().append(items)
        self.lines += batch.lines
        assert result.appended == len(batch.lines)
        assert result.events == len(self.lines)
        assert result.head == self.model_head()

    @rule(data=st.data())
    def append_a_malformed_batch(self, data: st.DataObject) -> None:
        """A batch with one malformation is refused whole with its typed error; nothing changes."""
        malformed = data.draw(malformed_logs(base=self.log()), label="batch")
        if malformed.stored_by_a_store:
            return  # an event without ts is stamped, not refused: see append_without_ts
        store = self.open_store()
        try:
            store.append(malformed.batch)
        except gamma.InputError as error:
            expected = malformed.error if isinstance(malformed.error, tuple) else (malformed.error,)
            assert type(error) in expected, f"{type(error).__name__}: {error}"
            assert error.line == malformed.batch_line, str(error)
            if malformed.field is not None:
                assert error.field == malformed.field, str(error)
        else:
            raise AssertionError(f"the store accepted a batch with {malformed.what}")

    @precondition(lambda self: self.lines)
    @rule(data=st.data())
    def retry_stored_events(self, data: st.DataObject) -> None:
        """Events already stored, sent again as first written (a writer retrying), are skipped."""
        again = data.draw(
            st.lists(st.sampled_from(self.lines), min_size=1, max_size=3), label="again"
        )
        fresh = data.draw(extensions(self.log(), max_size=2), label="new")
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in again)
        result = self.open_store().append(text + fresh.text())
        self.lines += fresh.lines
        assert result.appended == len(fresh.lines)
        assert result.head == self.model_head()

    @rule(data=st.data())
    def append_without_ts(self, data: st.DataObject) -> None:
        """Trailing events that omit ts are stamped now, in order; with the clock behind the
        previous ts the batch is refused (never stamped ahead of the clock, issue 11)."""
        batch = data.draw(extensions(self.log(), min_size=1, max_size=3), label="batch")
        unstamped = data.draw(st.integers(1, len(batch.lines)), label="unstamped")
        floor = (
            parse_ts(batch.lines[-unstamped - 1]["ts"]) if unstamped < len(batch.lines) else None
        )
        if floor is None and self.lines:
            floor = parse_ts(self.lines[-1]["ts"])
        anchor = floor or parse_ts("2026-03-01T09:00:00Z")
        now = anchor + data.draw(
            st.sampled_from((timedelta(0), timedelta(minutes=-5), timedelta(minutes=5))),
            label="now - floor",
        )
        sent, expected = [], []
        behind = floor is not None and now < floor
        for index, line in enumerate(batch.lines):
            if index >= len(batch.lines) - unstamped:
                stamp = now if floor is None else max(now, floor)
                floor = stamp
                sent.append({k: v for k, v in line.items() if k != "ts"})
                expected.append({**line, "ts": format_ts(stamp)})
            else:
                sent.append(line)
                expected.append(line)
        if behind:
            head = self.model_head()
            with pytest.raises(gamma.InputError) as info:
                self.open_store().append(sent, now=now)
            assert info.value.field == "ts", str(info.value)
            assert self.open_store().head() == head
            return
        result = self.open_store().append(sent, now=now)
        self.lines += expected
        assert result.appended == len(sent)
        assert result.head == self.model_head()

    @rule()
    def export(self) -> None:
        """The export is exactly the model's canonical JSONL."""
        assert list(self.open_store().export()) == [canonical_json(line) for line in self.lines]

    @rule()
    def verify(self) -> None:
        """Verify finds the chain intact, over the model's events, ending at the model's head."""
        report = self.open_store().verify(key=self.key, expect_head=self.model_head())
        assert report.ok, report.message
        assert report.events == len(self.lines)
        assert report.head == self.model_head()

    @rule()
    def reopen(self) -> None:
        """Closing and reopening keeps the events, the head and the recorded policy."""
        self.open_store().close()
        self.store = Store.open(self.path, key=self.key)
        assert self.store.policy == self.policy

    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        """Γ over the stored events equals Γ over the model's events, byte for byte."""
        log = self.log()
        actor = data.draw(actors(log), label="actor")
        at = data.draw(probe_times(log), label="at")
        stored = self.open_store().events()
        got = gamma.resolve(stored, actor, at, self.policy)
        assert got.to_json() == gamma.resolve(log.events, actor, at, self.policy).to_json()
        assert got.log == head_of(canonical_json(line) for line in log.prefix(at).lines)

    # -- after every step -------------------------------------------------------------------

    @invariant()
    def the_store_holds_the_model(self) -> None:
        if self.store is None:
            return
        assert self.store.head() == self.model_head()
        assert len(self.store) == len(self.lines)

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)


# Each example opens a fresh SQLite file and every append commits with synchronous=FULL, so
# steps cost milliseconds: up to 20 steps per sequence, and the nightly profile capped at
# 2,000 sequences (the ci profile runs its 500 in about half a minute).
StoreMachine.TestCase.settings = settings(
    max_examples=min(settings().max_examples, 2_000),
    stateful_step_count=min(20, settings().stateful_step_count),
    deadline=None,
)
TestStoreMachine = StoreMachine.TestCase
