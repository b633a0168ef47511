"""One worker's state: the engine over the store, the decision log, and the freshness waits.

A store-backed ``gamma.Engine`` writes only from the thread that opened the store's
SQLite connection, so every engine call runs on one thread of this worker, the
engine thread (``call``): the event loop stays free to read requests while one
decides, a request that runs past its time limit is answered (504) while its work
finishes there, and no other thread calls the engine (the change feed's
``events_since`` only copies a slice of its append-only event list, and ``len``
reads the token the engine thread last set). Before each decision the engine reads
what other workers appended (``refresh``), so several workers over one store agree
once each has read to the same position. A request is decided at the clock (only an
auditor's may name a time), but never before the last event of the log it is decided
over: a revoke stamped within the current second is in force for every decision that
holds it. At-exact views are kept, the last ``EXACT_KEPT`` used.

A decision is recorded in the decision log on the thread that decided it, after the
handler and before anything is returned: if the record fails, the caller gets 503 and never the
decision (fail closed). The engine thread takes every request queued when it looks
(up to ``GROUP_MAX``), decides them in order and records their rows in one commit
(group commit: one lock, one commit for many decisions under load, and one read of the
store before them); no answer of the group leaves before its commit. A row that cannot be
encoded fails its own request only, the rest of its group is recorded without it; a lock
or commit that fails fails the whole group (503). A job that is not a decision (a write,
a proof, a read of the store) first commits the decisions queued before it. A write
takes the decision log's write lock first, then appends to the store, then inserts its
row and commits: a write whose row cannot be taken is not stored (503), so no write is in
force unlogged. Handler refusals (400, 403) are recorded
too, with their status, so the log holds every answer the server gave about the
store; requests that never reached a handler (401, 413, a freshness wait that ran
out) are not decisions and are not recorded.

A short decision (an evaluation, a batch of up to ``INLINE_BATCH``) is decided on the event
loop's own thread, with no hop to the engine thread, when that is as safe as the hop: no job
is on the engine thread or queued for it (so nothing mutates the engine meanwhile; the
check and the decision hold ``_inline_lock``, which every submission takes too), no
freshness token is asked for, and the engine is current: the store's ``data_version``
(read through a read-only connection of the loop's own) has not moved since before the
last read the engine thread made for a decision. Its row is committed on the loop's thread
too, after the decision, with every other decided in the same turn of the loop (group
commit on the loop: one statement, no thread), without waiting for the log's lock: when
another worker holds it, the engine thread commits them, waiting, first in its queue. No
answer leaves before its row is committed; a job submitted for the engine thread first
commits the rows waiting, so the log keeps the order decisions were made in. A long job (a
search, a resolve, a large batch, a freshness wait, a write) always runs on the engine
thread, under the 504 deadline; a request past its deadline while its row waits for the
commit is answered 504 and its row still committed (decided, logged, not delivered).

Freshness tokens are MACs under the deployment's token key, which the decision log keeps
(``gamma.serve.freshness``): every worker that opens the log reads the same key, so a
token one worker returned is checked by any other, and after a restart.
"""

from __future__ import annotations

import asyncio
import functools
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs

from gamma.audit.checkpoint import SignerKey, parse_signer, sign_checkpoint
from gamma.core.incremental.engine import EngineState
from gamma.core.integrity.merkle import inclusion_proof
from gamma.core.reading.convert import converter
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Event
from gamma.core.terms.policy import Policy
from gamma.serve import endpoints
from gamma.serve.errors import DecisionLogError, Forbidden, NotFresh, ServeError
from gamma.serve.freshness import FreshnessToken
from gamma.serve.identity import Callers
from gamma.serve.metrics import Metrics
from gamma.serve.types import Caller, Handler, View
from gamma.storage.decisions import (
    DecisionEntry,
    DecisionLog,
    DecisionLogFailure,
    DecisionLogLocked,
    PreparedRow,
    decision_log_path,
)
from gamma.storage.engine import Engine
from gamma.storage.store import KEY_ENV, Store, check_key, read_key_file

__all__ = [
    "Answer",
    "GROUP_MAX",
    "INLINE_BATCH",
    "KEY_ENV",
    "NotConfigured",
    "POLL",
    "Service",
    "chain_key",
    "error_body",
    "refusal",
    "utc_second",
]

Returned = TypeVar("Returned")

#: Seconds between reads of the store while a request waits for it to grow.
POLL = 0.005
#: How many (position -> Merkle root) pairs a worker remembers for checking tokens.
ROOTS_KEPT = 4096
#: At-exact views kept (least recently used dropped): a cold one is a fold of its prefix.
EXACT_KEPT = 4
#: Callers whose actor's JSON form is kept for the decision log's rows.
ACTORS_KEPT = 4096
#: Decisions the engine thread takes from its queue at once and records in one commit.
GROUP_MAX = 64
#: The largest batch of evaluations decided on the event loop's thread (a few ms at most).
INLINE_BATCH = 100
#: The decisions short enough to be decided on the event loop's thread (see the module's text).
_INLINE = frozenset({"evaluation", "evaluations"})


class NotConfigured(ServeError):
    """The server was started without what this endpoint needs (a signer key): 404."""

    status = 404


@attrs.frozen
class Answer:
    """What the app sends back: the status, the JSON body and the token of the log it saw."""

    status: int
    body: dict[str, Any]
    token: FreshnessToken


@attrs.frozen
class _Job:
    """Work for the engine thread: ``fn(*args)`` whose result (or error) settles ``future`` on
    ``loop``; a ``decision`` returns a ``_Decided`` whose row is committed before it settles."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    decision: bool = False


@attrs.frozen
class _Decided:
    """A decision made on the engine thread, waiting for its row's commit to be answered."""

    answer: Answer
    entry: DecisionEntry
    endpoint: str
    outcome: str


#: A request's future, and the value or the error it is settled with.
Settled = tuple[asyncio.Future[Any], Any, BaseException | None]
#: A job, and the value or the error its request is answered with.
JobOutcome = tuple[_Job, Any, BaseException | None]


def _unlogged(exc: DecisionLogFailure) -> DecisionLogError:
    """The refusal of a decision whose row could not be committed (503: fail closed)."""
    error = DecisionLogError(f"the decision log could not be written, so nothing is answered: {exc}")
    error.__cause__ = exc
    return error


def _settle(results: list[Settled]) -> None:
    """On the event loop: hand each waiting request its result or error (a request that
    timed out meanwhile has no one waiting)."""
    for future, value, error in results:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


def utc_second() -> datetime:
    """The server's clock: UTC, whole seconds (what a request without a time is decided at)."""
    return datetime.now(UTC).replace(microsecond=0)


def chain_key(path: str | None) -> bytes | None:
    """A keyed store's chain key: the file named, else ``$GAMMA_CHAIN_KEY``, else None."""
    if path is not None:
        return read_key_file(path)
    text = os.environ.get(KEY_ENV, "").strip()
    return check_key(text.encode("utf-8")) if text else None


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def refusal(exc: Exception) -> tuple[int, dict[str, Any]]:
    """A handler's refusal as the server answers it (and the decision log records it):
    Forbidden 403, an input error 400; anything else is no refusal and is raised again."""
    if isinstance(exc, Forbidden):
        return exc.status, error_body("forbidden", str(exc))
    if isinstance(exc, InputError):
        return 400, error_body("invalid_request", str(exc))
    raise exc


class Service:
    """The engine, decision log, callers and metrics of one worker.

    ``start`` opens the store and the decision log on the engine thread; ``stop``
    closes them. Attributes read on the event loop (``token``, ``started``) are
    replaced whole on the engine thread, never mutated.
    """

    def __init__(
        self,
        store: str | Path,
        callers: str | Path,
        *,
        fresh_wait: float,
        signer: SignerKey | None = None,
        key: bytes | None = None,
        clock: Callable[[], datetime] = utc_second,
    ) -> None:
        self.store_path = Path(store)
        self.callers_path = Path(callers)
        self.callers: Callers | None = None  # read at start, on the store's policy's ladders
        self.handlers: dict[str, Handler] = {}
        self.fresh_wait = fresh_wait
        self.signer = signer
        self.metrics = Metrics.new()
        self.token: FreshnessToken | None = None
        self._key = key
        self._clock = clock
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._engine: Engine | None = None
        self._decisions: DecisionLog | None = None
        self._exact: OrderedDict[int, EngineState] = OrderedDict()  # at-exact views, LRU
        self._roots: OrderedDict[int, str] = OrderedDict()
        self._tree_store: Store | None = None  # read-only: the stored Merkle tree
        self._token_key: bytes | None = None  # the decision log's: every worker's tokens
        self._last_ts: datetime | None = None  # the ts of the last event held (engine thread)
        self._actors: dict[Caller, dict[str, Any]] = {}  # each caller's actor, unstructured
        self._formatted: tuple[datetime, str] | None = None  # the last time formatted
        # deciding on the event loop's thread: jobs submitted and not yet finished with by the
        # engine thread (under the lock), the loop's own read-only view of the store's
        # data_version, and its value before the engine thread's last read for a decision
        self._inline_lock = threading.Lock()
        self._unfinished = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probe: Store | None = None
        self._current: tuple[int, int] | None = None
        # decisions made on the loop's thread whose rows wait for this turn's commit
        self._batch: list[tuple[asyncio.Future[Answer], PreparedRow, _Decided]] = []

    @classmethod
    def from_files(
        cls, store: str | Path, callers: str | Path, *, fresh_wait: float,
        signer_key: str | None = None, chain_key_file: str | None = None,
    ) -> Service:
        """A service over ``store`` for the callers of the callers file; keys read from files."""
        signer = None
        if signer_key is not None:
            try:
                text = Path(signer_key).read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read the signer key: {exc.strerror}",
                                 source=signer_key) from None
            signer = parse_signer(text, source=signer_key)
        return cls(store, callers, fresh_wait=fresh_wait, signer=signer,
                   key=chain_key(chain_key_file))

    # -- the engine thread ---------------------------------------------------------------

    async def call(self, fn: Callable[..., Returned], *args: Any) -> Returned:
        """Run ``fn(*args)`` on the engine thread (the only thread that touches the engine)."""
        return await self._submit(fn, args, decision=False)  # type: ignore[no-any-return]

    def _submit(self, fn: Callable[..., Any], args: tuple[Any, ...], *,
                decision: bool) -> asyncio.Future[Any]:  # fmt: skip
        """Queue ``fn(*args)`` for the engine thread (started at the first job); its future."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="gamma-engine", daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        if self._batch and loop is self._loop:
            self._commit_here()  # the log keeps the order decisions were made in
        future = loop.create_future()
        with self._inline_lock:
            self._unfinished += 1
            self._jobs.put(_Job(fn, args, future, loop, decision))
        return future

    def _finished(self, results: list[Settled], count: int) -> None:
        """On the event loop: the engine thread is done with ``count`` jobs; settle them."""
        with self._inline_lock:
            self._unfinished -= count
        _settle(results)

    def _serve(self) -> None:
        """The engine thread: each job in order; the decisions among them committed in groups."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            group, stop = [job], False
            while len(group) < GROUP_MAX:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
            self._run(group)
            if stop:
                return

    def _run(self, group: list[_Job]) -> None:
        """Run ``group`` in order: decisions are decided over one read of the store and their
        rows committed together before any of them is answered; any other job first commits
        the decisions queued before it."""
        pending: list[tuple[_Job, _Decided]] = []
        done: list[JobOutcome] = []
        read = False
        for job in group:
            if job.future.cancelled():  # its request is answered already (504): not decided
                continue
            if not job.decision:
                done += self._commit(pending)
                pending = []
            try:
                if job.decision and not read:
                    self.refresh()  # once for the group: what other workers appended
                    read = True
                value = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - handed to the request that asked
                done.append((job, None, exc))
                continue
            if job.decision:
                pending.append((job, value))
            else:
                done.append((job, value, None))
                read = False  # a write or a wait may have moved the log
        done += self._commit(pending)
        by_loop: dict[asyncio.AbstractEventLoop, list[Settled]] = {job.loop: [] for job in group}
        counts: dict[asyncio.AbstractEventLoop, int] = {}
        for job in group:  # every job, answered or not: the engine thread is done with it
            counts[job.loop] = counts.get(job.loop, 0) + 1
        for job, value, error in done:
            by_loop[job.loop].append((job.future, value, error))
        for loop, results in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._finished, results, counts[loop])
            except RuntimeError:  # the loop is closed: no one is waiting any more
                with self._inline_lock:
                    self._unfinished -= counts[loop]

    def _commit(self, pending: list[tuple[_Job, _Decided]]) -> list[JobOutcome]:
        """Record the rows of ``pending`` with one commit; each job's answer, or its error
        (DecisionLogError: fail closed). A row that cannot be encoded fails alone: the others
        are committed without it."""
        if not pending:
            return []
        out: list[JobOutcome] = []
        try:
            log = self._log()
        except DecisionLogError as exc:
            return [(job, None, exc) for job, _ in pending]
        rows, kept = [], []
        for job, decided in pending:
            try:
                rows.append(log.prepare(decided.entry))
            except DecisionLogFailure as exc:
                out.append((job, None, _unlogged(exc)))
            else:
                kept.append((job, decided))
        try:
            log.commit(rows)
        except DecisionLogFailure as exc:
            return out + [(job, None, _unlogged(exc)) for job, _ in kept]
        except Exception as exc:  # noqa: BLE001 - unforeseen: the group fails (500), never open
            return out + [(job, None, exc) for job, _ in kept]
        for job, decided in kept:
            self.metrics.decided(decided.endpoint, decided.outcome)
            out.append((job, decided.answer, None))
        return out

    @property
    def started(self) -> bool:
        return self._engine is not None

    async def start(self) -> None:
        await self.call(self._open)
        self._loop = asyncio.get_running_loop()
        self._probe = Store.open(self.store_path, read_only=True)
        mark = self._probe.changes()
        await self.call(self.refresh)
        self._current = mark

    async def stop(self) -> None:
        self._commit_here()
        probe, self._probe, self._current = self._probe, None, None
        if probe is not None:
            probe.close()
        await self.call(self._close)
        self._jobs.put(None)
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join)

    def _open(self) -> None:
        engine = Engine.open(self.store_path, key=self._key)
        try:
            self.callers = Callers.load(self.callers_path, policy=engine.policy)
            self.handlers = endpoints.handlers(self.callers)
            self._decisions = DecisionLog.open(decision_log_path(self.store_path))
            self._token_key = self._decisions.token_key
            self._tree_store = Store.open(self.store_path, read_only=True)
        except BaseException:
            if self._decisions is not None:
                self._decisions.close()
            engine.close()
            raise
        self._engine = engine
        self._note()

    def _close(self) -> None:
        if self._tree_store is not None:
            self._tree_store.close()
        if self._decisions is not None:
            self._decisions.close()
        if self._engine is not None:
            self._engine.close()
        self._engine = None

    @property
    def tree_store(self) -> Store:
        """The store opened read-only for its Merkle tree (on the engine thread only)."""
        if self._tree_store is None:
            raise ServeError("the store is not open yet")
        return self._tree_store

    @property
    def token_key(self) -> bytes:
        """The deployment's freshness-token key (kept in the decision log, shared by workers)."""
        if self._token_key is None:
            raise ServeError("the store is not open yet")
        return self._token_key

    def token_at(self, position: int) -> FreshnessToken:
        """The token of the log's first ``position`` events (engine thread)."""
        return FreshnessToken.make(self.token_key, position, self._root_at(position))

    @property
    def engine(self) -> Engine:
        """The engine (on the engine thread only)."""
        if self._engine is None:
            raise ServeError("the store is not open yet")
        return self._engine

    def _note(self) -> None:
        """Remember the log's token after a read (the position gauge too)."""
        head = self.engine.tree_head
        self._roots[head.size] = head.root
        self._roots.move_to_end(head.size)
        while len(self._roots) > ROOTS_KEPT:
            self._roots.popitem(last=False)
        self.token = FreshnessToken.make(self.token_key, head.size, head.root)
        last = self.engine.events_since(head.size - 1) if head.size else ()
        self._last_ts = last[-1].ts if last else None
        self.metrics.position.set(head.size)

    def refresh(self) -> int:
        """Read what other workers appended; the events now held (engine thread)."""
        if self.engine.refresh():
            self._note()
        return len(self.engine)

    # -- what the change feed reads (gamma.serve.watch.FeedSource) ---------------------------

    @property
    def policy(self) -> Policy:
        return self.engine.policy

    def __len__(self) -> int:
        return 0 if self.token is None else self.token.position

    def events_since(self, position: int) -> Sequence[Event]:
        """The events after ``position`` that this worker holds (a copy of a prefix of them)."""
        return self.engine.events_since(position)[: max(0, len(self) - position)]

    async def wait_for_growth(self, position: int, timeout: float) -> int:
        """The events held once more than ``position`` are, or when ``timeout`` seconds pass."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            held = await self.call(self.refresh)
            left = deadline - loop.time()
            if held > position or left <= 0:
                return held
            await asyncio.sleep(min(POLL, left))

    # -- freshness -----------------------------------------------------------------------

    async def reach(self, token: FreshnessToken) -> None:
        """Wait (up to the configured limit) until this worker holds ``token``'s position."""
        if token.position <= len(self):
            return
        held = await self.wait_for_growth(token.position - 1, self.fresh_wait)
        if held < token.position:
            raise NotFresh(f"the log has not reached position {token.position} here within"
                           f" {self.fresh_wait:g} s (it holds {held})")

    def _root_at(self, position: int) -> str:
        """The Merkle root over the first ``position`` events held (engine thread): as noted
        after a read, the engine's own when it holds exactly that many, else from the
        store's stored tree (O(log² n) reads of its perfect subtrees, never a fold of the
        log)."""
        root = self._roots.get(position)
        if root is not None:
            return root
        head = self.engine.tree_head
        if head.size == position:
            return head.root
        return self.tree_store.tree_head(position).root

    def _check_root(self, token: FreshnessToken, field: str) -> None:
        """The token is this deployment's MAC over the log's root at its position (400 if not:
        another log's, another deployment's, or forged)."""
        if not token.matches(self.token_key, self._root_at(token.position)):
            raise InputError("the token is not of this log: its MAC does not match the log at"
                             " its position", field=field)  # fmt: skip

    def _view(self, fresh: FreshnessToken | None, exact: FreshnessToken | None) -> tuple[View, FreshnessToken, datetime | None]:
        """The view a request is decided over, its token and its last event's ``ts``
        (engine thread)."""
        engine = self.engine
        if fresh is not None:
            self._check_root(fresh, "Gamma-At-Least-As-Fresh")
        if exact is None or exact.position == len(engine):
            if exact is not None:
                self._check_root(exact, "Gamma-At-Exact")
            token = self.token  # noted with the engine's head at every read and write
            if token is None or token.position != len(engine):
                token = FreshnessToken.of(engine, self.token_key)
            # the state past the engine's argument checks: the handlers validated the body
            return engine.state, token, self._last_ts
        if exact.position > len(engine):
            raise NotFresh(f"the log has not reached position {exact.position} here")
        self._check_root(exact, "Gamma-At-Exact")
        state = self._exact.get(exact.position)
        if state is None:  # O(position): a fold of the prefix, within the request's time limit
            state = EngineState(engine.policy)
            state.extend(engine.events_since(0)[: exact.position])
            self._exact[exact.position] = state
            while len(self._exact) > EXACT_KEPT:
                self._exact.popitem(last=False)
        self._exact.move_to_end(exact.position)
        return state, exact, state.events[-1].ts if state.events else None

    # -- decisions -------------------------------------------------------------------------

    async def decide(
        self, endpoint: str, caller: Caller, body: Mapping[str, Any], *,
        fresh: FreshnessToken | None = None, exact: FreshnessToken | None = None,
    ) -> Answer:
        """Decide one request over the view asked for, recorded before it is returned."""
        for token in (fresh, exact):
            if token is not None:
                await self.reach(token)
        if fresh is None and exact is None and self._short(endpoint, body):
            here = self._decide_here(endpoint, caller, body)
            if here is not None:
                return await here
        mark = self._probe.changes() if self._probe is not None and self._on_loop() else None
        answer: Answer = await self._submit(self._decide, (endpoint, caller, body, fresh, exact),
                                            decision=True)
        if mark is not None:  # its group read the store after the mark: current as of it
            self._current = mark
        return answer

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    @staticmethod
    def _short(endpoint: str, body: Mapping[str, Any]) -> bool:
        """A decision short enough for the event loop's thread (see the module's text)."""
        if endpoint not in _INLINE:
            return False
        items = body.get("evaluations")
        return not isinstance(items, list) or len(items) <= INLINE_BATCH

    def _decide_here(self, endpoint: str, caller: Caller, body: Mapping[str, Any],
                     ) -> asyncio.Future[Answer] | None:  # fmt: skip
        """Decide on the event loop's thread (module text); the future of its answer, settled
        once its row is committed with the others decided in this turn of the loop, or None
        when deciding here is not safe now (the engine thread has work, or the store moved
        since its last read): then the engine thread decides."""
        probe, loop = self._probe, self._loop
        if probe is None or loop is None or self._current is None or not self._on_loop():
            return None
        with self._inline_lock:
            if self._unfinished or probe.changes() != self._current:
                return None
            decided = self._decide(endpoint, caller, body, None, None)
        log = self._log()
        try:
            row = log.prepare(decided.entry)
        except DecisionLogFailure as exc:
            raise _unlogged(exc) from exc
        future: asyncio.Future[Answer] = loop.create_future()
        if not self._batch:
            loop.call_soon(self._commit_here)
        self._batch.append((future, row, decided))
        return future

    def _commit_here(self) -> None:
        """Commit the rows decided on the loop's thread since the last commit, in one
        statement that does not wait for the log's lock, then answer them; when another
        worker holds the lock the engine thread commits them (it waits), first in its
        queue; a failure fails them all closed."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        rows = [row for _, row, _ in batch]
        try:
            self._log().commit(rows, wait=False)
        except DecisionLogLocked:
            waiting = self._submit(self._log().commit, (rows,), decision=False)
            waiting.add_done_callback(functools.partial(self._answer_batch, batch))
            return
        except Exception as exc:  # noqa: BLE001 - every request of the batch fails, never open
            self._fail_batch(batch, exc)
            return
        self._settle_batch(batch)

    def _answer_batch(self, batch: list[tuple[asyncio.Future[Answer], PreparedRow, _Decided]],
                      committed: asyncio.Future[Any]) -> None:  # fmt: skip
        error = committed.exception() if not committed.cancelled() else DecisionLogError("stopped")
        if error is not None:
            self._fail_batch(batch, error)
        else:
            self._settle_batch(batch)

    def _settle_batch(self, batch: list[tuple[asyncio.Future[Answer], PreparedRow, _Decided]]) -> None:
        for future, _, decided in batch:
            self.metrics.decided(decided.endpoint, decided.outcome)
            if not future.done():
                future.set_result(decided.answer)

    @staticmethod
    def _fail_batch(batch: list[tuple[asyncio.Future[Answer], PreparedRow, _Decided]],
                    exc: BaseException) -> None:  # fmt: skip
        error = _unlogged(exc) if isinstance(exc, DecisionLogFailure) else exc
        for future, _, _ in batch:
            if not future.done():
                future.set_exception(error)

    def _decide(
        self, endpoint: str, caller: Caller, body: Mapping[str, Any],
        fresh: FreshnessToken | None, exact: FreshnessToken | None,
    ) -> _Decided:
        """Decide one request (engine thread, the store read for its group); its row is
        committed by ``_commit`` before it is answered."""
        view, token, last = self._view(fresh, exact)
        handler = self.handlers[endpoint]
        # never before the view's last event: a revocation stamped within this second (or
        # by another worker's clock) is in force for every decision over a log that holds it
        now = self._clock() if last is None else max(self._clock(), last)
        started = time.perf_counter()
        at = now
        try:
            at = endpoints.request_time(endpoint, caller, body, now)
            status, response = 200, handler(view, caller, at, body)
        except (InputError, Forbidden) as exc:
            status, response = refusal(exc)
        elapsed = time.perf_counter() - started
        entry = self._entry(endpoint, caller, body, view, token, at, status, response, elapsed)
        return _Decided(Answer(status, response, token), entry, endpoint,
                        endpoints.outcome(status, response))

    async def append(self, caller: Caller, body: Mapping[str, Any]) -> Answer:
        """Append as the caller (``endpoints.append``), recorded before it is returned."""
        return await self.call(self._append, caller, body)

    def _append(self, caller: Caller, body: Mapping[str, Any]) -> Answer:
        """The decision log's write lock first, then the store, then the row, then commit: a
        write whose row cannot be taken is not stored (503), so no write is in force unlogged."""
        log = self._log()
        try:
            with log.writing() as record:
                self.refresh()  # under the lock: no worker writes between this read and ours
                engine = self.engine
                at = self._clock() if self._last_ts is None else max(self._clock(), self._last_ts)
                started = time.perf_counter()
                try:
                    status, response = 200, endpoints.append(engine, caller, body, at=at)
                except (InputError, Forbidden) as exc:
                    status, response = refusal(exc)
                elapsed = time.perf_counter() - started
                self._note()
                token = self.token if self.token is not None else FreshnessToken.of(engine, self.token_key)
                record(self._entry("append", caller, body, engine, token, at, status, response,
                                   elapsed))
        except DecisionLogFailure as exc:
            raise DecisionLogError(f"the decision log could not be written, so nothing is"
                                   f" stored: {exc}") from exc
        self.metrics.decided("append", endpoints.outcome(status, response))
        return Answer(status, response, token)

    def _log(self) -> DecisionLog:
        if self._decisions is None:
            raise DecisionLogError("the decision log is not open: nothing is decided unlogged")
        return self._decisions

    def _entry(
        self, endpoint: str, caller: Caller, body: Mapping[str, Any], view: View, token: FreshnessToken,
        at: datetime, status: int, response: dict[str, Any], elapsed: float,
    ) -> DecisionEntry:
        actor = self._actors.get(caller)
        if actor is None:
            if len(self._actors) >= ACTORS_KEPT:  # a host's verifier may name many callers
                self._actors.clear()
            actor = self._actors[caller] = converter.unstructure(caller.actor)
        if self._formatted is None or self._formatted[0] != at:
            self._formatted = (at, format_ts(at))
        return DecisionEntry(
            endpoint=endpoint, caller=caller.name, actor=dict(actor),
            on_behalf=endpoints.recorded_on_behalf(view, caller, endpoint, body), at=self._formatted[1],
            request=dict(body), position=token.position, root=self._root_at(token.position),
            token=token.encode(),
            policy=view.policy.digest, status=status, response=response,
            reasons=endpoints.reasons(response) if status == 200 else [],
            duration_ms=round(elapsed * 1000, 3), auditor=caller.auditor,
        )

    # -- proofs and checkpoints (auditors only) -----------------------------------------------

    @staticmethod
    def _auditor(caller: Caller, what: str) -> None:
        """Proofs and checkpoints are the auditor's: an inclusion path holds the leaf hashes of
        other events (hidden ones of the caller's own tenant too) and a checkpoint the root
        over every value, so either would let an agent check a guess of a hidden value."""
        if not caller.auditor:
            raise Forbidden(f"caller {caller.name!r} is not an auditor: {what} commits to"
                            " values it may not see, so only an auditor may have it")

    async def prove(self, caller: Caller, event_id: str) -> Answer:
        return await self.call(self._prove, caller, event_id)

    def _prove(self, caller: Caller, event_id: str) -> Answer:
        """An inclusion proof of an event in the log held now, for an auditor (403 otherwise).

        The path comes from the store's tree; a client checks it against a tree head it
        trusts (a checkpoint this server signed over the events it validated), so a tree
        table that lies only yields a proof that fails there."""
        self._auditor(caller, "an inclusion proof")
        self.refresh()
        engine, store = self.engine, self.tree_store
        size = len(engine)
        position = store.position_of(event_id)
        event = None
        if position is not None and position <= size:
            event = engine.events_since(position - 1)[0]
        line = endpoints.provable(event, caller)  # another tenant's: as if it were not there
        assert position is not None
        proof = inclusion_proof(store.tree(size), position - 1, size)
        return Answer(200, {"proof": proof.to_dict(), "event_line": line}, self.token_at(size))

    async def checkpoint(self, caller: Caller) -> Answer:
        return await self.call(self._checkpoint, caller)

    def _checkpoint(self, caller: Caller) -> Answer:
        """The log's tree head now, signed with the server's signer key (C2SP signed note),
        for an auditor (403 otherwise)."""
        self._auditor(caller, "a checkpoint")
        if self.signer is None:
            raise NotConfigured("this server signs no checkpoints: start it with --signer-key")
        self.refresh()
        head = self.engine.tree_head
        note = sign_checkpoint(head, self.signer)
        return Answer(200, {"checkpoint": note, **head.to_dict()},
                      FreshnessToken.make(self.token_key, head.size, head.root))

    async def ready(self) -> int:
        """The events held after reading the store (the store answers: ready)."""
        return await self.call(self.refresh)

