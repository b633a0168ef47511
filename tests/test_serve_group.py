"""The engine thread's group commit (issue 31's speed work): decisions queued together are
decided in order and their rows committed in one transaction before any is answered; a row
that cannot be encoded fails its own request only; a lock or commit that fails fails the
whole group closed; a request that timed out while queued is never decided. In process: the
engine thread is held on an event so that the requests queue up behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
        writing = log.writing

        @contextlib.contextmanager
        def counted() -> Iterator[Any]:
            self.transactions += 1
            with writing() as insert:
                yield insert

        log.writing = counted  # type: ignore[method-assign]

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

        def locked() -> Any:
            raise DecisionLogFailure("database is locked")

        log.writing = locked  # type: ignore[method-assign]
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
