"""The engine thread's group commit (issue 31's speed work): decisions queued together are
decided in order and their rows committed in one transaction before any is answered; a row
that cannot be encoded fails its own request only; a lock or commit that fails fails the
whole group closed; a request that timed out while queued is never decided. In process: the
engine thread is held on an event so that the requests queue up behind it. ``TestInline``: when
a short decision is made on the event loop's own thread, and when it is not.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import gamma

pytest.importorskip("starlette")

from serve_process import write_callers  # noqa: E402
from test_serve_app import CALLERS, evaluation, make_store  # noqa: E402

from gamma.serve.endpoints import HANDLERS  # noqa: E402
from gamma.serve.errors import DecisionLogError  # noqa: E402
from gamma.serve.replay import replay_decisions  # noqa: E402
from gamma.serve.service import Answer, Service, refusal  # noqa: E402
from gamma.serve.types import Caller  # noqa: E402
from gamma.storage.decisions import DecisionLog, DecisionLogFailure, decision_log_path  # noqa: E402

FACTS = ["F1", "F2", "F19", "F3", "F4", "F5"]


def rows(store: Path) -> int:
    with DecisionLog.open(decision_log_path(store), read_only=True) as log:
        return len(log)


class Held:
    """A service whose engine thread can be held while requests queue behind it, and whose
    decision log counts the transactions it opens."""

    def __init__(self, store: Path, service: Service) -> None:
        self.store = store
        self.service = service
        self.transactions = 0
        log = service._decisions
        assert log is not None
        commit = log.commit

        def counted(rows: Any, **options: Any) -> list[int]:
            self.transactions += 1
            return commit(rows, **options)

        log.commit = counted  # type: ignore[method-assign]

    @property
    def alice(self) -> Caller:
        assert self.service.callers is not None
        return next(c for c in self.service.callers if c.name == "alice-agent")

    async def queued(self, bodies: list[dict[str, Any]], *, timeout: float | None = None,
                     ) -> list[Answer | BaseException]:  # fmt: skip
        """Decide ``bodies`` while the engine thread is held, so they queue up; then release it."""
        release = threading.Event()
        holding = asyncio.ensure_future(self.service.call(release.wait, 10))
        await asyncio.sleep(0.05)  # the engine thread is in release.wait now
        decisions = [self.service.decide("evaluation", self.alice, body) for body in bodies]
        if timeout is not None:
            decisions = [asyncio.wait_for(d, timeout) for d in decisions]
        tasks = [asyncio.ensure_future(d) for d in decisions]
        await asyncio.sleep(0.05 if timeout is None else timeout + 0.05)
        release.set()
        await holding
        return list(await asyncio.gather(*tasks, return_exceptions=True))


def run_held(tmp_path: Path, scenario: Any) -> Any:
    store = make_store(tmp_path / "memory.db")
    write_callers(tmp_path / "callers.toml", CALLERS)

    async def main() -> Any:
        service = Service.from_files(store, tmp_path / "callers.toml", fresh_wait=0.5)
        await service.start()
        try:
            return await scenario(Held(store, service))
        finally:
            await service.stop()

    return asyncio.run(main())


def test_decisions_queued_together_are_committed_in_one_transaction(tmp_path: Path) -> None:
    """Six decisions queued behind a busy engine thread: one transaction holds their six rows,
    each answer is the one asked for, and the log replays."""

    async def scenario(held: Held) -> tuple[list[Any], int, int, int, list[Answer]]:
        before = rows(held.store)
        answers = await held.queued([evaluation(f) for f in FACTS])
        grouped, after = held.transactions, rows(held.store)
        alone = [await held.service.decide("evaluation", held.alice, evaluation(f)) for f in FACTS]
        return answers, grouped, before, after, alone

    answers, transactions, before, after, alone = run_held(tmp_path, scenario)
    assert all(isinstance(a, Answer) and a.status == 200 for a in answers), answers
    assert transactions == 1 and after - before == len(FACTS)
    assert [a.body for a in answers] == [a.body for a in alone]  # each its own, in its place
    assert len({str(a.body) for a in alone}) > 1
    store = tmp_path / "memory.db"
    report = replay_decisions(store, handlers=HANDLERS, refusal=refusal)
    assert report.ok, report.render()


def test_a_row_that_cannot_be_encoded_fails_its_own_request_only(tmp_path: Path) -> None:
    """One handler answer that is no JSON: that request is 503 (DecisionLogError), the other
    five are answered and logged, in one more transaction after the failed one."""

    async def scenario(held: Held) -> tuple[list[Any], int]:
        decide = HANDLERS["evaluation"]

        def poisoned(view: Any, caller: Caller, at: Any, body: Any) -> dict[str, Any]:
            if body["resource"]["id"] == "F3":
                return {"decision": True, "context": {"bad": object()}}
            return decide(view, caller, at, body)

        held.service.handlers["evaluation"] = poisoned
        before = rows(held.store)
        answers = await held.queued([evaluation(f) for f in FACTS])
        return answers, rows(held.store) - before

    answers, written = run_held(tmp_path, scenario)
    bad = FACTS.index("F3")
    assert isinstance(answers[bad], DecisionLogError)
    assert all(isinstance(a, Answer) for i, a in enumerate(answers) if i != bad), answers
    assert written == len(FACTS) - 1


def test_a_lock_that_cannot_be_taken_fails_the_whole_group_closed(tmp_path: Path) -> None:
    """The log's lock refused: every request of the group is a DecisionLogError, none gets a
    decision and no row is written."""

    async def scenario(held: Held) -> tuple[list[Any], int]:
        log = held.service._decisions
        assert log is not None

        def locked(rows: Any, **options: Any) -> Any:
            raise DecisionLogFailure("database is locked")

        log.commit = locked  # type: ignore[method-assign]
        before = rows(held.store)
        answers = await held.queued([evaluation(f) for f in FACTS])
        return answers, rows(held.store) - before

    answers, written = run_held(tmp_path, scenario)
    assert all(isinstance(a, DecisionLogError) for a in answers), answers
    assert "database is locked" in str(answers[0]) and written == 0


def test_a_request_that_timed_out_in_the_queue_is_never_decided(tmp_path: Path) -> None:
    """Requests whose caller gave up while they waited behind a busy engine thread are not
    decided and leave no row; the next request is decided as usual."""

    async def scenario(held: Held) -> tuple[list[Any], int, Answer]:
        before = rows(held.store)
        answers = await held.queued([evaluation(f) for f in FACTS[:3]], timeout=0.05)
        await asyncio.sleep(0.05)
        after = rows(held.store)
        later = await held.service.decide("evaluation", held.alice, evaluation("F1"))
        return answers, after - before, later

    answers, written, later = run_held(tmp_path, scenario)
    assert all(isinstance(a, TimeoutError) for a in answers), answers
    assert written == 0 and later.status == 200


class Threads:
    """The evaluation handler wrapped to note the thread of each call."""

    def __init__(self, service: Service) -> None:
        self.names: list[str] = []
        decide = HANDLERS["evaluation"]

        def noted(view: Any, caller: Caller, at: Any, body: Any) -> dict[str, Any]:
            self.names.append(threading.current_thread().name)
            return decide(view, caller, at, body)

        service.handlers["evaluation"] = noted


class TestInline:
    """A short decision is made on the event loop's thread only when that is as safe as the
    hop to the engine thread: the engine idle and current, the log's lock free."""

    def test_an_idle_current_engine_decides_on_the_loop_thread(self, tmp_path: Path) -> None:
        """Idle and current: the evaluation runs on the loop's thread, one row, replayable;
        while the engine thread is held, the next ones queue for it instead."""

        async def scenario(held: Held) -> tuple[list[str], int, list[Any], str]:
            threads = Threads(held.service)
            before = rows(held.store)
            first = await held.service.decide("evaluation", held.alice, evaluation("F1"))
            assert first.status == 200 and rows(held.store) == before + 1
            queued = await held.queued([evaluation("F2"), evaluation("F3")])
            return threads.names, rows(held.store) - before, queued, threading.current_thread().name

        names, written, queued, loop = run_held(tmp_path, scenario)
        assert names == [loop, "gamma-engine", "gamma-engine"] and written == 3
        assert all(isinstance(a, Answer) for a in queued)
        report = replay_decisions(tmp_path / "memory.db", handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()

    def test_a_store_another_writer_moved_is_read_on_the_engine_thread(self, tmp_path: Path) -> None:
        """Another connection appends to the store: the next decision is made on the engine
        thread, over the log with that event (the retraction is in force at once); the one
        after it, the engine current again, on the loop's thread."""

        async def scenario(held: Held) -> tuple[list[str], list[Answer], int, int, str]:
            threads = Threads(held.service)
            granted = await held.service.decide("evaluation", held.alice, evaluation("F1"))
            before = len(held.service)
            with gamma.Store.open(held.store) as other:
                other.append([{"id": "e99", "type": "retract", "ts": "2026-03-01T10:00:00Z",
                               "actor": "crm", "tenant": "acme", "fact": "F1",
                               "reason": "moved"}])  # fmt: skip
            retracted = await held.service.decide("evaluation", held.alice, evaluation("F1"))
            again = await held.service.decide("evaluation", held.alice, evaluation("F1"))
            return (threads.names, [granted, retracted, again], before, len(held.service),
                    threading.current_thread().name)  # fmt: skip

        names, (granted, retracted, again), before, after, loop = run_held(tmp_path, scenario)
        assert names == [loop, "gamma-engine", loop] and after == before + 1
        assert granted.body["decision"] is True
        assert retracted.body["decision"] is False and again.body == retracted.body
        assert retracted.token.position == after

    def test_decisions_of_one_turn_are_committed_together_on_the_loop_thread(self, tmp_path: Path) -> None:
        """Six evaluations started together while the engine is idle: all decided on the loop's
        thread, their rows committed in one statement, each its own answer; replayable."""

        async def scenario(held: Held) -> tuple[list[str], int, int, list[Answer], str]:
            threads = Threads(held.service)
            before, commits = rows(held.store), held.transactions
            answers = await asyncio.gather(
                *(held.service.decide("evaluation", held.alice, evaluation(f)) for f in FACTS))
            return (threads.names, held.transactions - commits, rows(held.store) - before,
                    list(answers), threading.current_thread().name)  # fmt: skip

        names, commits, written, answers, loop = run_held(tmp_path, scenario)
        assert names == [loop] * len(FACTS) and commits == 1 and written == len(FACTS)
        assert [a.body["decision"] for a in answers] == [
            a.body["decision"] for a in alone_answers(tmp_path)]
        report = replay_decisions(tmp_path / "memory.db", handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()

    def test_a_log_locked_elsewhere_is_committed_by_the_engine_thread(self, tmp_path: Path) -> None:
        """Another connection holds the decision log's lock: the loop does not wait for it; the
        engine thread commits the row, waiting; the answer leaves only after the lock is let
        go and the row is in, one row."""

        async def scenario(held: Held) -> tuple[list[str], int, float, float, str]:
            threads = Threads(held.service)
            before = rows(held.store)
            taken, release = threading.Event(), threading.Event()

            def hold() -> None:
                with DecisionLog.open(decision_log_path(held.store)) as other, other.writing():
                    taken.set()
                    release.wait(10)

            holder = threading.Thread(target=hold)
            holder.start()
            assert taken.wait(10)
            loop = asyncio.get_running_loop()
            loop.call_later(0.2, release.set)
            started = loop.time()
            answer = await held.service.decide("evaluation", held.alice, evaluation("F1"))
            waited = loop.time() - started
            holder.join()
            assert answer.status == 200
            return threads.names, rows(held.store) - before, waited, 0.2, threading.current_thread().name

        names, written, waited, held_for, loop = run_held(tmp_path, scenario)
        assert names == [loop] and written == 1
        assert waited >= held_for * 0.9


def alone_answers(tmp_path: Path) -> list[Answer]:
    """The answers to ``FACTS`` one at a time, over a fresh copy of the store."""
    fresh = tmp_path / "alone"
    fresh.mkdir()

    async def scenario(held: Held) -> list[Answer]:
        return [await held.service.decide("evaluation", held.alice, evaluation(f)) for f in FACTS]

    answers: list[Answer] = run_held(fresh, scenario)
    return answers
