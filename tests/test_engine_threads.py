"""One gamma.Engine shared by 16 threads: every read is the pure Γ at some serial position.

Four threads append a generated log's batches (each starts its batch as the one before it
starts, so appends overlap), twelve resolve, resolve some keys, check facts and render the
context block. Afterwards every read is compared with ``gamma.resolve`` over the log's
prefix at a position it may have been served at: an append is never half seen, and the
answer is the bytes of a serial order. The thread switch interval is cut to a microsecond
so that threads interleave inside the engine's calls, not only between them.

And the collector, which all threads share: no library call switches it, and a host's
pauses overlapping across threads leave it off until the last one closes.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from helpers import AT, A, R, X, stamp
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Log, actors, logs, probe_times

import gamma

APPENDERS, READERS = 4, 12


@contextmanager
def _switching_often() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _batches(data: st.DataObject, log: Log) -> list[list[dict[str, Any]]]:
    lines, out, done = list(log.lines), [], 0
    while done < len(lines):
        size = data.draw(st.integers(1, min(3, len(lines) - done)), label="batch size")
        out.append(lines[done : done + size])
        done += size
    return out


def _append_all(engine: gamma.Engine, batches: list[list[dict[str, Any]]]) -> dict[int, bool]:
    """Four threads take the batches in turn, each starting as the one before it starts.

    Whether each batch was taken; an append that raised anything but an InputError fails."""
    started = [threading.Event() for _ in batches]
    taken: dict[int, bool] = {}
    broken: list[str] = []

    def appender(first: int) -> None:
        for i in range(first, len(batches), APPENDERS):
            if i:
                started[i - 1].wait()
                time.sleep(0)  # most often the batch before takes the lock first; not always
            started[i].set()
            try:
                engine.append(batches[i])
                taken[i] = True
            except gamma.InputError:  # an order the race made invalid: refused whole
                taken[i] = False
            except Exception as exc:  # noqa: BLE001 - a torn append is a finding
                broken.append(f"batch {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=appender, args=(k,)) for k in range(APPENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not broken, broken
    return taken


def _reader(
    engine: gamma.Engine,
    seed: int,
    who: list[dict[str, Any]],
    times: list[Any],
    appending: threading.Event,
    ready: threading.Barrier,
    reads: list[tuple[Any, ...]],
) -> None:
    """Reads until the appends are done (and three more), noting the engine's length around each."""
    rng, extra = random.Random(seed), 3
    ready.wait()
    while extra:
        if not appending.is_set():
            extra -= 1
        actor, at = rng.randrange(len(who)), rng.randrange(len(times))
        kind = rng.choice(("resolve", "context", "keys", "check"))
        before = len(engine)
        try:
            if kind in ("resolve", "context"):
                got = engine.resolve(who[actor], times[at])
                answer: Any = got.render("context") if kind == "context" else got.to_json()
                asked: Any = None
            else:
                whole = engine.resolve(who[actor], times[at])
                facts = sorted([a.fact for a in whole.admitted] + [x.fact for x in whole.excluded])
                keys = sorted({a.key for a in whole.admitted} | {x.key or "" for x in whole.excluded})
                if kind == "keys":
                    asked = frozenset(rng.sample(keys, min(2, len(keys))))
                    part = engine.resolve(who[actor], times[at], keys=asked)
                    answer = (part.admitted, part.excluded, part.known_unknowns)
                else:
                    asked = tuple(rng.sample(facts, min(3, len(facts))))
                    answer = engine.check(who[actor], times[at], asked)
        except Exception as exc:  # noqa: BLE001 - a torn read is a finding, not a crash
            answer, asked = f"raised {type(exc).__name__}: {exc}", None
        reads.append((kind, actor, at, asked, answer, before, len(engine)))


def _head_of_valid(lines: list[dict[str, Any]], policy: gamma.Policy) -> str | None:
    """The chain head of ``lines`` when they are a valid log (two appends validated against
    the same events and both taken would not be), else None."""
    try:
        parsed = gamma.parse_events([json.dumps(line) for line in lines], policy=policy)
    except gamma.InputError:
        return None
    return gamma.resolve(parsed, {"id": "x", "tenant": "x"}, "2100-01-01T00:00:00Z", policy).log


def _expected(
    prefix: list[dict[str, Any]], policy: gamma.Policy, actor: dict[str, Any], at: Any
) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in prefix], policy=policy)
    return gamma.resolve(events, actor, at, policy)


def _pure_answer(kind: str, asked: Any, pure: gamma.Resolution) -> Any:
    if kind == "resolve":
        return pure.to_json()
    if kind == "context":
        return pure.render("context")
    if kind == "keys":
        return (
            tuple(a for a in pure.admitted if a.key in asked),
            tuple(x for x in pure.excluded if (x.key or "") in asked),
            tuple(k for k in pure.known_unknowns if k in asked),
        )
    decided = {a.fact: a for a in pure.admitted} | {x.fact: x for x in pure.excluded}
    return {fact: decided.get(fact) for fact in asked}


@settings(max_examples=6)  # each example is 16 threads over a whole log, hundreds of reads
@given(st.data())
def test_sixteen_threads_read_as_some_serial_order(data: st.DataObject) -> None:
    log = data.draw(logs(min_size=6, max_size=24), label="log")
    batches = _batches(data, log)
    who = [data.draw(actors(log), label="actor") for _ in range(3)]
    times = [log.last_ts() + timedelta(days=1), data.draw(probe_times(log), label="at")]
    seeds = data.draw(st.lists(st.integers(0, 2**32), min_size=READERS, max_size=READERS))
    engine = gamma.Engine(log.policy)
    reads: list[tuple[Any, ...]] = []
    appending, ready = threading.Event(), threading.Barrier(READERS + 1)
    appending.set()
    with _switching_often():
        readers = [
            threading.Thread(target=_reader, args=(engine, s, who, times, appending, ready, reads))
            for s in seeds
        ]
        for thread in readers:
            thread.start()
        ready.wait()  # every reader is about to read: the appends start among them
        try:
            taken = _append_all(engine, batches)
        finally:
            appending.clear()
            for thread in readers:
                thread.join()

    # the appends: each batch taken whole and contiguous, or not at all; the log valid
    by_id = {line["id"]: line for line in log.lines}
    final = [by_id[event.id] for event in engine.events]
    runs = {tuple(line["id"] for line in batches[i]): taken[i] for i in range(len(batches))}
    ids = [line["id"] for line in final]
    for run, kept in runs.items():
        at_ = ids.index(run[0]) if run[0] in ids else -1
        assert kept == (at_ >= 0) and (not kept or tuple(ids[at_ : at_ + len(run)]) == run), run
    assert len(ids) == sum(len(run) for run, kept in runs.items() if kept)
    assert engine.head == _head_of_valid(final, log.policy)

    # the reads: each equal to the pure Γ at a position between its start and its end
    pure: dict[tuple[int, int, int], gamma.Resolution] = {}

    def at_position(p: int, actor: int, at: int) -> gamma.Resolution:
        if (p, actor, at) not in pure:
            pure[p, actor, at] = _expected(final[:p], log.policy, who[actor], times[at])
        return pure[p, actor, at]

    torn = [
        read for read in reads
        if not _served_by_some(read, lambda p, a, t: at_position(p, a, t))
    ]  # fmt: skip
    assert not torn, f"{len(torn)} of {len(reads)} reads match no serial order, e.g. {torn[0]}"


def _served_by_some(
    read: tuple[Any, ...], pure: Callable[[int, int, int], gamma.Resolution]
) -> bool:
    kind, actor, at, asked, answer, before, after = read
    if isinstance(answer, str) and answer.startswith("raised "):
        return False
    return any(
        answer == _pure_answer(kind, asked, pure(p, actor, at)) for p in range(before, after + 1)
    )


def test_no_library_call_switches_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading, Γ, the engine and the outputs leave the process's collector alone."""
    switched: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        monkeypatch.setattr(gc, name, lambda *_, name=name: switched.append(name))
    lines = [json.dumps(e) for e in stamp([A("F1", "k1", "v1"), A("F2", "k1", "v2"),
                                           R("F1"), X("X1", ["F2"])])]  # fmt: skip
    who = {"id": "alice", "tenant": "acme"}
    pure = gamma.resolve(gamma.parse_events(lines), who, AT)
    engine = gamma.Engine()
    engine.append(lines[:2])
    engine.append(lines[2:])
    assert engine.resolve(who, AT).to_json() == pure.to_json()
    engine.check(who, AT, ["F2"])
    engine.resolve(who, AT, keys=["k1"]).render("context")
    pure.render("text")
    assert switched == []


def test_pauses_overlapping_across_threads_restore_the_collector_when_the_last_closes() -> None:
    """A host's pause in one thread is not ended by another thread's pause closing first."""
    was = gc.isenabled()
    gc.enable()
    first, second = gamma.collector_paused(), gamma.collector_paused()
    try:
        first.__enter__()
        other = threading.Thread(target=second.__enter__)
        other.start()
        other.join()
        first.__exit__(None, None, None)
        assert not gc.isenabled()  # the other thread's pause is still open
        closing = threading.Thread(target=second.__exit__, args=(None, None, None))
        closing.start()
        closing.join()
        assert gc.isenabled()
    finally:
        gc.enable() if was else gc.disable()
