"""Where events come from: a JSONL file or a store, told apart by the SQLite header.

I/O lives here (and in the store), never in the resolver.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from gamma.core.errors import InputError
from gamma.core.events import check_names, load_events
from gamma.core.model import Event
from gamma.core.policy import DEFAULT_POLICY, Policy

__all__ = ["LoadedLog", "is_store", "open_log", "events_and_policy"]

SQLITE_HEADER = b"SQLite format 3\x00"


@attrs.frozen
class LoadedLog:
    """Validated events and, for a store, the policy it was created with."""

    events: tuple[Event, ...]
    store_policy: Policy | None = None


def is_store(path: str | Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_HEADER
    except OSError:
        return False


def open_log(path: str | Path, *, policy: Policy | None = None) -> LoadedLog:
    """Read a log file or store; a store's events were validated when appended."""
    if not Path(path).exists():
        raise InputError("no such file", source=str(path))
    if is_store(path):
        from gamma.storage.store import Store

        with Store.open(path) as store:
            events, store_policy = store.events(), store.policy
        if policy is not None and policy != store_policy:
            # the store validated its events against its own policy, not this one
            check_names(events, policy, source=f"{path} (event position)")
        return LoadedLog(events, store_policy)
    return LoadedLog(load_events(path, policy=policy or DEFAULT_POLICY))


def events_and_policy(
    log: str | Path | Sequence[Event], policy: Policy | None
) -> tuple[Sequence[Event], Policy]:
    """A log given as a path (file or store) or as events, and the policy to resolve it under:
    the one given, else a store's own, else the default."""
    if isinstance(log, (str, Path)):
        loaded = open_log(log, policy=policy)
        return loaded.events, policy or loaded.store_policy or DEFAULT_POLICY
    return log, policy or DEFAULT_POLICY
