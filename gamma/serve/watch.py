"""The change feed behind ``GET /v1/watch?since=TOKEN``: what a caller may rely on, as it moves.

For each log position p after the caller's token, the feed compares Γ(H[:p], A, ts_p)
with the previous position's (``changes``): a fact newly admitted, one no longer
admitted, one still admitted whose record the caller reads changed (its value, its
recomputed inputs, its recheck flag). Only positions with changes are sent, in log
order, each an SSE ``change`` whose ``id`` is the token after p, so a client that
reconnects with ``Last-Event-ID`` (or ``since=``) gets every change after it exactly
once; a ``position`` message when the feed has caught up (at once the first time, then
at most once a second while it passes positions without changes) lets a client advance
its token, and a comment after a few quiet seconds keeps proxies from closing the stream.

Isolation is total (SPEC §3), so a watcher keeps an ``EngineState`` fed only its
tenant's events (the ``Event`` objects the worker already holds, never a copy of the
log). Another tenant's event only moves the time: Γ is decided again then only when
one of the tenant's ``valid_from``/``valid_until`` instants lies in the step.

A fact the caller cannot see (excluded with any visibility code) is never named, as
``gamma.integrations`` answers for it: a change is reported only for a fact admitted
before or after, and one the caller could rely on that becomes hidden is ``removed``,
with neither value nor reason, the one answer that names no cause.

What the feed reads of the worker (``FeedSource``, which ``gamma.serve.service.Service``
is): ``policy``; ``token_key`` (the deployment's key: a token is a MAC over the log's
root, never the root); ``store_path`` (opened read-only here for the Merkle roots the
tokens are made from, from the store's tree table); ``len(source)`` (events the worker holds);
``events_since(position)`` (those after it, in log order); and ``await
wait_for_growth(position, timeout) -> int`` (the events held once more than
``position`` are, reading the store, which another process may grow, every few ms
meanwhile; or when ``timeout`` seconds pass). One poller per source calls it for all
of that source's watchers. ``stop(source)`` ends every open feed of the source (the
server shutting down): each returns at its next step, so the stream closes at once.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from gamma.core.incremental.engine import EngineState
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.decisions import VISIBILITY_CODES, Admitted
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Actor, Assert, Event
from gamma.core.terms.policy import Policy
from gamma.integrations.binding import relied_record
from gamma.serve.errors import NotFresh
from gamma.serve.freshness import FreshnessToken
from gamma.serve.types import Caller
from gamma.storage.store import Store

__all__ = [
    "WATCH_CHUNK",
    "KEEPALIVE",
    "POSITION_EVERY",
    "Follower",
    "FeedSource",
    "changes",
    "encode_message",
    "resume_token",
    "stop",
    "watch_events",
]

#: Seconds of silence after which the feed sends a keep-alive comment.
KEEPALIVE = 5.0
#: Positions decided per hop to a worker thread: a long catch-up streams as it goes.
WATCH_CHUNK = 256
#: Seconds between ``position`` messages after the first (a busy log moves every few ms).
POSITION_EVERY = 1.0
#: Seconds one poll of the shared poller may wait on the source before it looks again.
POLL_SPAN = 0.25
#: Roots of recent positions kept per source (every watcher announces the same positions).
WATCH_ROOTS_KEPT = 1024

Message = dict[str, str]
"""One SSE message: ``event``, ``id`` and ``data``, or ``comment`` (the fields of a server-sent event)."""


class FeedSource(Protocol):
    """What the feed reads from the worker's service."""

    @property
    def policy(self) -> Policy: ...

    @property
    def store_path(self) -> Path: ...

    @property
    def token_key(self) -> bytes: ...

    def __len__(self) -> int: ...

    def events_since(self, position: int) -> Sequence[Event]: ...

    async def wait_for_growth(self, position: int, timeout: float) -> int: ...


# -- the pure diff -------------------------------------------------------------------------


def _by_fact(resolution: Resolution | None) -> dict[str, Admitted]:
    return {} if resolution is None else {a.fact: a for a in resolution.admitted}


def _delta(
    before: Mapping[str, Admitted], after: Resolution, admitted: Mapping[str, Admitted]
) -> list[dict[str, Any]]:
    """The changes from the facts admitted ``before`` to ``after`` (its admitted facts by id:
    ``admitted``), ordered by key, then fact id (code-point order). A record the engine kept
    (the same object) is not looked at again, so a step costs the facts that moved."""
    out: list[dict[str, Any]] = []
    for fact, a in admitted.items():
        old = before.get(fact)
        if old is a:
            continue
        record = relied_record(a)
        if old is None:
            out.append({"change": "admitted", **record})
        elif relied_record(old) != record:
            out.append({"change": "changed", **record})
    for fact, old in before.items():
        if fact in admitted:
            continue
        x = after.excluded_fact(fact)
        if x is None or not VISIBILITY_CODES.isdisjoint(x.codes):  # as if it had never been
            out.append({"change": "removed", "fact": fact, "key": old.key})
        else:
            out.append({"change": "excluded", "fact": fact, "key": old.key,
                        "reasons": list(x.codes)})  # fmt: skip
    out.sort(key=lambda c: (c["key"], c["fact"]))
    return out


def changes(before: Resolution | None, after: Resolution) -> list[dict[str, Any]]:
    """What changed for the caller between two resolutions of the same actor (``None``: nothing).

    One entry per fact admitted in either, where something changed, ordered by key and
    then fact id: ``admitted`` (newly, with its record), ``changed`` (still admitted,
    its record differs: value, recomputed inputs, recheck flag), ``excluded`` (no
    longer admitted, with its exclusion codes; no value) or ``removed`` (no longer
    admitted and now hidden from the caller, by any visibility code: no value, no
    reason). Facts admitted in neither are not reported, so a hidden fact never appears.
    """
    return _delta(_by_fact(before), after, _by_fact(after))


# -- one watcher's state ---------------------------------------------------------------------


class Follower:
    """One caller's view of a growing log: its tenant's events in an ``EngineState``, and Γ
    at the last position taken (``ts`` of that event), to diff the next one against."""

    def __init__(self, actor: Actor, policy: Policy) -> None:
        self.actor = actor
        self.position = 0
        self._state = EngineState(policy)
        self._at: datetime | None = None
        self._flips: list[datetime] = []  # the tenant's valid_from / valid_until, sorted
        self._last: Resolution | None = None
        self._admitted: dict[str, Admitted] = {}  # the last resolution's, by fact id

    def start(self, events: Iterable[Event]) -> None:
        """Take the log's first events without reporting: the state a token names."""
        for event in events:
            self._take(event)
        if self._at is not None:
            self._last = self._state.resolve(self.actor, self._at)
            self._admitted = _by_fact(self._last)

    def step(self, event: Event) -> list[dict[str, Any]]:
        """Take the log's next event; the changes at its position."""
        before = self._at
        if not self._take(event) and (before is None or not self._flipping(before)):
            return []
        assert self._at is not None
        resolution = self._state.resolve(self.actor, self._at)
        last, self._last = self._last, resolution
        if last is not None and last.admitted == resolution.admitted:
            return []  # only an admitted fact's change is one (an identical tuple: at once)
        admitted = _by_fact(resolution)
        found, self._admitted = _delta(self._admitted, resolution, admitted), admitted
        return found

    def steps(self, events: Iterable[Event]) -> list[tuple[int, list[dict[str, Any]]]]:
        """Take events in order; each position with changes, and its changes."""
        found = []
        for event in events:
            step = self.step(event)
            if step:
                found.append((self.position, step))
        return found

    def _take(self, event: Event) -> bool:
        """Move to the next position; True when the event is of the actor's tenant."""
        self.position += 1
        self._at = event.ts
        if event.tenant != self.actor.tenant:
            return False
        self._state.extend([event])
        if isinstance(event, Assert):
            for instant in (event.valid_from, event.valid_until):
                if instant is not None:
                    bisect.insort(self._flips, instant)
        return True

    def _flipping(self, before: datetime) -> bool:
        """Whether a validity instant of the tenant lies in (before, now]: only then can Γ
        differ without an event of the tenant (SPEC §4: a fact is valid from ``valid_from``
        inclusive to ``valid_until`` exclusive, so each change happens at its instant)."""
        assert self._at is not None
        i = bisect.bisect_right(self._flips, before)
        return i < len(self._flips) and self._flips[i] <= self._at


# -- the feed --------------------------------------------------------------------------------


class _Growth:
    """One poller per source for all its watchers: a hundred idle watchers cost one read of
    the store per poll, not a hundred. Waiters sleep on an event the poller replaces (and
    sets) each time the source grows; the poller stops when nobody waits. The roots of the
    positions recently announced are kept here too, read once for every watcher."""

    def __init__(self, source: FeedSource) -> None:
        self._source = source
        self.roots: OrderedDict[int, str] = OrderedDict()  # recent tokens' roots, shared
        self._grown = asyncio.Event()
        self._waiting = 0
        self._poller: asyncio.Task[None] | None = None
        self._failed: Exception | None = None
        self.stopping = False  # the server is shutting down: every feed ends

    def stop(self) -> None:
        """End every feed of this source at its next step (and wake those that wait)."""
        self.stopping = True
        self._wake()

    async def wait(self, position: int, timeout: float) -> None:
        """Until the source holds more than ``position`` events, or ``timeout`` seconds; what
        the store raised when it could not be read (the stream ends with it)."""
        self._waiting += 1
        try:
            if self._poller is None or self._poller.done():
                self._failed, self._poller = None, asyncio.create_task(self._poll())
            with anyio.move_on_after(timeout):
                while len(self._source) <= position and self._failed is None and not self.stopping:
                    await self._grown.wait()
            if self._failed is not None:
                raise self._failed
        finally:
            self._waiting -= 1

    async def _poll(self) -> None:
        told = -1  # the events held when waiters were last woken (at first: wake them to look)
        try:
            while self._waiting:
                held = await self._source.wait_for_growth(told, POLL_SPAN)
                if held > told:  # growth since the last wake, whoever's read brought it in
                    told = held
                    self._wake()
        except Exception as exc:  # every waiter hears of it
            self._failed = exc
            self._wake()

    def _wake(self) -> None:
        grown, self._grown = self._grown, asyncio.Event()
        grown.set()


_GROWTH: weakref.WeakKeyDictionary[FeedSource, _Growth] = weakref.WeakKeyDictionary()


def _growth(source: FeedSource) -> _Growth:
    found = _GROWTH.get(source)
    if found is None:
        found = _GROWTH[source] = _Growth(source)
    return found


def stop(source: FeedSource) -> None:
    """End the open feeds of ``source`` (the server is shutting down): each stream closes at
    its next step, so the server does not wait for watchers until its graceful timeout."""
    found = _GROWTH.get(source)
    if found is not None:
        found.stop()


def resume_token(since: str | None, last_event_id: str | None) -> FreshnessToken | None:
    """The token a watch resumes from: ``Last-Event-ID`` (an EventSource reconnecting sends
    the last ``id`` it saw) over the ``since`` query parameter; None for neither (from now)."""
    if last_event_id:
        return FreshnessToken.decode(last_event_id, field="Last-Event-ID")
    if since is not None:
        return FreshnessToken.decode(since, field="since")
    return None


def encode_message(message: Message) -> bytes:
    """One SSE message as the stream carries it (for a plain streaming response)."""
    if "comment" in message:
        return f": {message['comment']}\n\n".encode()
    lines = [f"{name}: {message[name]}" for name in ("event", "id", "data") if name in message]
    return ("\n".join(lines) + "\n\n").encode()


def _feed_message(
    event: str, position: int, store: Store, roots: OrderedDict[int, str],
    found: list[dict[str, Any]] | None, key: bytes,
) -> Message:  # fmt: skip
    root = roots.get(position)
    if root is None:
        root = roots[position] = store.tree_head(position).root
        while len(roots) > WATCH_ROOTS_KEPT:
            roots.popitem(last=False)
    token = FreshnessToken.make(key, position, root).encode()
    data: dict[str, Any] = {"token": token, "position": position}
    if found is not None:
        data["changes"] = found
    return {"event": event, "id": token, "data": compact_json(data)}


async def watch_events(
    source: FeedSource,
    caller: Caller,
    since: FreshnessToken | None,
    *,
    wait: float = 2.0,
    keepalive: float = KEEPALIVE,
    field: str = "since",
) -> AsyncIterator[Message]:
    """Check ``since`` and build the caller's state at it, then return the feed.

    Everything that can refuse happens here, before a byte is streamed: a token this
    worker does not reach within ``wait`` seconds is NotFresh (503), one whose MAC is not
    over the log's root at its position an InputError (400) naming ``field`` (where the token came
    from: ``since`` or ``Last-Event-ID``). ``since`` None watches from now.
    """
    store = Store.open(source.store_path, read_only=True)
    try:
        key = source.token_key
        held = await source.wait_for_growth(len(source), 0)  # read the store as it is now
        if since is None:
            since = FreshnessToken.make(key, held, store.tree_head(held).root)
        if since.position > held:
            held = await source.wait_for_growth(since.position - 1, wait)
            if since.position > held:
                raise NotFresh(f"the log has not reached position {since.position} here"
                               f" within {wait:g} s")  # fmt: skip
        if not since.matches(key, store.tree_head(since.position).root):
            raise InputError("the token is not of this log: its MAC does not match the log at"
                             " its position", field=field)  # fmt: skip
        follower = Follower(caller.actor, source.policy)
        first = source.events_since(0)[: since.position]
        await anyio.to_thread.run_sync(follower.start, first)
        del first
    except BaseException:
        store.close()
        raise
    return _feed(source, follower, store, keepalive, key)


async def _feed(
    source: FeedSource, follower: Follower, store: Store, keepalive: float, key: bytes
) -> AsyncIterator[Message]:
    """The messages after the follower's position until the source stops (``stop``); the
    store closes with the stream."""
    growth = _growth(source)
    try:
        sent: int | None = None  # the position of the last id sent
        quiet = told = -math.inf  # when the last message, and the last position message, went
        while not growth.stopping:
            if len(source) > follower.position:
                events = source.events_since(follower.position)
                for start in range(0, len(events), WATCH_CHUNK):
                    if growth.stopping:  # a long catch-up ends between chunks too
                        return
                    chunk = events[start : start + WATCH_CHUNK]
                    for position, found in await anyio.to_thread.run_sync(follower.steps, chunk):
                        yield _feed_message("change", position, store, growth.roots, found, key)
                        sent, quiet = position, time.monotonic()
            # through what was read: said at once the first time, then at most once a
            # POSITION_EVERY (a log that never stops growing still gets them)
            now = time.monotonic()
            due = told + POSITION_EVERY - now
            if told == -math.inf or (sent != follower.position and due <= 0):
                yield _feed_message("position", follower.position, store, growth.roots, None, key)
                sent, quiet, told = follower.position, now, now
            elif now - quiet >= keepalive:
                yield {"comment": "keep-alive"}
                quiet = now
            if len(source) > follower.position:
                continue
            left = keepalive - (now - quiet)
            if sent != follower.position:
                left = min(left, max(due, 0))
            await growth.wait(follower.position, left)
    finally:
        store.close()
