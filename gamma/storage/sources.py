"""Logs given by path: a JSONL file or a store, told apart by the SQLite header.

I/O lives here (and in the store), never in the resolver.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from gamma.core.reading.events import check_names
from gamma.core.reading.reader import read
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.storage.store import Store, is_store
from gamma.storage.verify import VerifyReport, verify_file

__all__ = ["LoadedLog", "open_log", "events_and_policy", "verify_path"]

@attrs.frozen
class LoadedLog:
    """Validated events and, for a store, the policy it was created with."""

    events: tuple[Event, ...]
    store_policy: Policy | None = None


def open_log(path: str | Path, *, policy: Policy | None = None) -> LoadedLog:
    """Read a log file or store; a store's events were validated when appended."""
    if not Path(path).exists():
        raise InputError("no such file", source=str(path))
    if is_store(path):
        with Store.open(path, read_only=True) as store:
            events, store_policy = store.events(), store.policy
        if policy is not None and policy != store_policy:
            # the store validated its events against its own policy, not this one
            check_names(events, policy, source=f"{path} (event position)")
        return LoadedLog(events, store_policy)
    return LoadedLog(read(Path(path), policy=policy or DEFAULT_POLICY))


def events_and_policy(
    log: str | Path | Sequence[Event], policy: Policy | None
) -> tuple[Sequence[Event], Policy]:
    """A log given as a path (file or store) or as events, and the policy to resolve it under:
    the one given, else a store's own, else the default."""
    if isinstance(log, (str, Path)):
        loaded = open_log(log, policy=policy)
        return loaded.events, policy or loaded.store_policy or DEFAULT_POLICY
    return log, policy or DEFAULT_POLICY


def verify_path(
    path: str | Path,
    *,
    key: bytes | None = None,
    expect_head: str | None = None,
    expect_prefix: str | None = None,
    expect_policy: str | None = None,
) -> VerifyReport:
    """Verify a store or a JSONL file, told apart by the SQLite header (``expect_policy``, the
    digest of the policy a store must have recorded, applies to stores only)."""
    if not Path(path).is_file():
        raise InputError("no such file", source=str(path))
    if not is_store(path):
        if expect_policy is not None:
            raise InputError("a JSONL log records no policy: --expect-policy is for stores",
                             field="expect_policy")
        return verify_file(path, key=key, expect_head=expect_head, expect_prefix=expect_prefix)
    with Store.open(path, read_only=True) as store:  # verify changes no byte of the evidence
        return store.verify(key=key, expect_head=expect_head, expect_prefix=expect_prefix,
                            expect_policy=expect_policy)
