"""Access reviews partitioned by tenant: serial, process pool and Dask agree byte for byte."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import gamma
from gamma.core.reading.events import parse_actor
from gamma.core.terms.canonical import canonical_json, parse_ts
from gamma.core.terms.policy import DEFAULT_POLICY
from gamma.review import jobs
from gamma.review.run import TaskFailure, pool, run_review, serial
from gamma.review.tasks import ReviewDone, ReviewTask, review_job

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import tenants  # noqa: E402

LINES, ACTOR_OBJS = tenants.log(400, 30, 90, seed=7)
EVENTS = gamma.parse_events(LINES)
ACTORS = [parse_actor(a) for a in ACTOR_OBJS]
AT = parse_ts(tenants.ts(350))
SINCE = parse_ts(tenants.ts(200))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = {}
    for path in (root / "tenants").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows[(row["resolution"]["actor"]["tenant"], row["actor"])] = row
    return rows


def test_partition_equals_whole_log_resolution_for_every_actor(tmp_path: Path) -> None:
    run_review(LINES, ACTORS, AT, DEFAULT_POLICY, tmp_path)
    results = _rows(tmp_path)
    assert len(results) == len(ACTORS)
    for actor in ACTORS:
        whole = gamma.resolve(EVENTS, actor, AT).to_dict()
        whole["excluded"] = [
            x for x in whole["excluded"]
            if all(r["code"] != "tenant_isolation" for r in x["reasons"])
        ]  # fmt: skip
        got = results[(actor.tenant, actor.id)]["resolution"]
        assert got.pop("digest") == results[(actor.tenant, actor.id)]["digest"]
        whole.pop("digest")
        assert got == whole, actor.id
    # the log field is the whole log's head, not the partition's
    assert {r["resolution"]["log"] for r in results.values()} == {
        gamma.resolve(EVENTS, ACTORS[0], AT).log
    }


def test_summary_matches_per_actor_resolutions(tmp_path: Path) -> None:
    returned = run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path)
    text = (tmp_path / "summary.json").read_text()
    summary = json.loads(text)
    assert text == canonical_json(summary) + "\n"
    assert returned["tenants"] == sorted(summary["tenants"]) and returned["events"] == len(EVENTS)
    checked = 0
    for actor in ACTORS:
        res = gamma.resolve(EVENTS, actor, AT)
        restricted = summary["tenants"][actor.tenant]["restricted"]
        admitted = {a.fact for a in res.admitted}
        for x in res.excluded:
            if x.codes == ("tenant_isolation",):
                continue
            assert restricted[x.fact]["withheld"][actor.id] == list(x.codes)
            assert actor.id not in restricted[x.fact]["admitted"]
            checked += 1
        for fact, entry in restricted.items():
            assert (actor.id in entry["admitted"]) == (fact in admitted)
    assert checked > 50
    assert any(
        "access_denied" in codes
        for t in summary["tenants"].values()
        for f in t["restricted"].values()
        for codes in f["withheld"].values()
    )


def test_since_lists_gains_and_losses(tmp_path: Path) -> None:
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path, since=SINCE)
    changed = 0
    for path in (tmp_path / "tenants").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            changed += bool(row["since"]["facts"])
    assert changed > 10


def test_serial_and_pool_byte_identical(tmp_path: Path) -> None:
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "a", since=SINCE)
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "b", since=SINCE,
               executor=pool(2))  # fmt: skip
    reversed_serial = lambda job, parts: serial(job, parts[::-1])  # noqa: E731
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "c", since=SINCE,
               executor=reversed_serial)  # fmt: skip
    a = _tree(tmp_path / "a")
    assert len(a) == 31
    assert a == _tree(tmp_path / "b") == _tree(tmp_path / "c")


def _boom(task: ReviewTask) -> ReviewDone:
    if task.tenant == "t0003":
        raise ValueError("bad partition")
    return review_job(task)


def test_failed_partition_is_reported_others_written(tmp_path: Path) -> None:
    summary = run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path,
                         job=_boom)  # fmt: skip
    assert summary["failed"] == [{"tenant": "t0003", "error": "ValueError: bad partition"}]
    files = sorted(p.name for p in (tmp_path / "tenants").iterdir())
    assert "t0003.jsonl" not in files and len(files) == 29
    assert not [p for p in tmp_path.rglob(".*tmp")]


def _die_once(task: ReviewTask) -> ReviewDone:
    """Kill this worker process the first time it takes tenant t0005 (a marker file says so)."""
    marker = Path(os.environ["GAMMA_TEST_MARKER"])
    if task.tenant == "t0005" and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)
    return review_job(task)


def test_pool_worker_killed_mid_partition_is_rerun(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("GAMMA_TEST_MARKER", str(tmp_path / "killed"))
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "a")
    summary = run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "b",
                         executor=pool(2), job=_die_once)  # fmt: skip
    assert (tmp_path / "killed").exists()
    assert summary["failed"] == []
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_dask_local_cluster_byte_identical_and_survives_a_killed_worker(
    tmp_path: Path, monkeypatch: Any
) -> None:
    distributed = pytest.importorskip("distributed")
    from gamma.review.on_dask import dask, on_this_host

    monkeypatch.setenv("GAMMA_TEST_MARKER", str(tmp_path / "killed"))
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "a", since=SINCE)
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as client:
        assert on_this_host(client)
        # as on a cluster of machines: partitions go as bytes, results come back as text
        run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "b", since=SINCE,
                   executor=dask(client, shared=False, in_flight=1, batch=4))  # fmt: skip
        # a killed worker's whole batch (t0005 and the tenants beside it) is re-run
        summary = run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "c", since=SINCE,
                             executor=dask(client, batch=4), job=_die_once)  # fmt: skip
    assert (tmp_path / "killed").exists()
    assert summary["failed"] == []
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b") == _tree(tmp_path / "c")


def test_jobs_module_has_no_io() -> None:
    assert "open" not in jobs.review_tenant.__code__.co_names
    assert TaskFailure("t", "e").tenant == "t"


def _records(tmp_path: Path) -> Path:
    """Audit records of a dozen actors, made when the log had 300 events, at AT."""
    from gamma.audit.replay import write_audit

    where = tmp_path / "records"
    where.mkdir()
    prefix = EVENTS[:300]
    at = parse_ts(tenants.ts(299))
    for actor in ACTORS[:12]:
        write_audit(where / f"{actor.id}.json", gamma.resolve(prefix, actor, at), prefix)
    return where


def test_replay_records_by_tenant_identical_then_different(tmp_path: Path) -> None:
    from gamma.review.run import run_replays

    where = _records(tmp_path)
    records = {p.name: json.loads(p.read_text()) for p in sorted(where.glob("*.json"))}
    outcomes, failed = run_replays(EVENTS, records, DEFAULT_POLICY)
    assert not failed and len(outcomes) == 12 and all(o.ok for o in outcomes), [
        o.text for o in outcomes if not o.ok
    ]
    pooled, _ = run_replays(EVENTS, records, DEFAULT_POLICY, executor=pool(2))
    assert [o.result for o in pooled] == [o.result for o in outcomes]
    # a record edited: different, with the field named; a log event edited: head mismatch
    name = sorted(records)[0]
    edited = {**records[name], "admitted": records[name]["admitted"][1:]}
    tenant = records[name]["actor"]["tenant"]
    first = next(i for i, e in enumerate(EVENTS) if e.tenant == tenant)
    lines = list(LINES)
    lines[first] = lines[first].replace('"crm"', '"mallory"')
    outcomes, _ = run_replays(EVENTS, {**records, name: edited}, DEFAULT_POLICY)
    assert [o.ok for o in outcomes].count(False) == 1
    assert "admitted" in outcomes[0].text or "different" in outcomes[0].text
    outcomes, _ = run_replays(gamma.parse_events(lines), records, DEFAULT_POLICY)
    assert all(not o.ok and "head mismatch" in o.text for o in outcomes)


def _gamma(capsys: Any, *args: object) -> tuple[int, str]:
    from gamma.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    code = exc.value.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().out


def test_cli_review_and_replay_records(tmp_path: Path, capsys: Any) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(LINES) + "\n")
    actors = tmp_path / "actors.jsonl"
    actors.write_text("".join(json.dumps(a) + "\n" for a in ACTOR_OBJS))
    args = ["review", log, "--actors", actors, "--at", tenants.ts(350)]
    one = _gamma(capsys, *args, "--out", tmp_path / "a")
    two = _gamma(capsys, *args, "--out", tmp_path / "b", "--workers", "2")
    assert one[0] == two[0] == 0, one
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    where = _records(tmp_path)
    code, out = _gamma(capsys, "replay", log, "--records", where)
    assert code == 0, out
    assert out.count(": identical") == 12 and "12 of 12 records identical" in out
    first = sorted(p.name for p in where.iterdir())[0]
    (where / "zz.json").write_text(
        (where / first).read_text().replace('"events":300', '"events":299')
    )
    code, out = _gamma(capsys, "replay", log, "--records", where)
    assert code == 1 and "zz.json: different" in out
    code, out = _gamma(capsys, "replay", log, "--expect", where / first)
    assert code == 0 and out.startswith("identical"), out


def test_offset_and_fractional_times_hash_as_their_canonical_text(tmp_path: Path) -> None:
    """The parent hashes each line's canonical text without parsing it in full: a line that
    writes its times with an offset or a fraction still gives the whole log's true heads."""
    lines = list(LINES)
    for i in range(0, 350, 7):
        stamp = tenants.ts(i)
        local = f"{stamp[:11]}{int(stamp[11:13]) + 1:02d}{stamp[13:19]}+01:00"
        lines[i] = lines[i].replace(f'"{stamp}"', f'"{local}"', 1)
    lines[3] = lines[3].replace(f'"{tenants.ts(3)}"', f'"{tenants.ts(3)[:19]}.000000Z"', 1)
    assert lines != LINES
    events = gamma.parse_events(lines)
    run_review(lines, ACTORS, AT, DEFAULT_POLICY, tmp_path / "a")
    row = next(iter(_rows(tmp_path / "a").values()))
    whole = gamma.resolve(events, ACTORS[0], AT)
    assert (row["resolution"]["log"], row["resolution"]["tree"]) == (whole.log, whole.to_dict()["tree"])
    run_review(EVENTS, ACTORS, AT, DEFAULT_POLICY, tmp_path / "b")
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")  # same events, same bytes


def test_each_partition_holds_only_its_tenant(tmp_path: Path) -> None:
    from gamma.review.spool import open_source, split

    found = split(open_source(LINES, None), tmp_path, times=[AT])
    from gamma.review.tasks import Shipment

    total = 0
    assert sorted(found.spooled) == sorted({e.tenant for e in EVENTS})  # every tenant, reviewed or not
    for tenant in sorted(found.spooled):
        ship = Shipment(tenant=tenant, events=found.spooled[tenant], path=str(found.path),
                        chunks=tuple(found.chunks[tenant]))  # fmt: skip
        remote = ship.loaded()
        assert remote.path is None and remote.data == ship.read()
        rows = [json.loads(line.split(" ", 2)[2]) for line in ship.read().decode().splitlines()]
        assert {r["tenant"] for r in rows} <= {tenant} and len(rows) == found.spooled[tenant]
        total += len(rows)
    assert total == found.total == len(EVENTS)  # also the events after AT: they are checked


@pytest.mark.parametrize(
    ("line", "edit", "field"),
    [
        (120, lambda t: t.replace('"actor": "crm"', '"actor": "crm", "colour": 1'), "colour"),
        (121, lambda t: t.replace('"id": "e120"', '"id": "e5"'), "id"),
        (122, lambda t: t.replace(tenants.ts(121), tenants.ts(3)), "ts"),
    ],
)
def test_bad_line_is_an_input_error_and_nothing_is_published(
    tmp_path: Path, line: int, edit: Any, field: str
) -> None:
    """Found by a worker (an unknown field) or by the parent (an id used in another tenant,
    time going backwards): InputError naming the line and field; no file looks complete."""
    from gamma.core.terms.errors import InputError

    lines = list(LINES)
    lines[line - 1] = edit(lines[line - 1])
    assert lines[line - 1] != LINES[line - 1]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    for name, executor in (("s", serial), ("p", pool(2))):
        with pytest.raises(InputError) as exc:
            run_review(log, ACTORS, AT, DEFAULT_POLICY, tmp_path / name, executor=executor)
        assert (exc.value.source, exc.value.line, exc.value.field) == (str(log), line, field)
        assert [p.name for p in (tmp_path / name).rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("where", ["a tenant with no actor", "an event after --at"])
def test_a_bad_line_the_review_does_not_resolve_is_still_an_input_error(
    tmp_path: Path, where: str
) -> None:
    """The whole log is held to SPEC §2, as gamma resolve holds it, not only what is resolved."""
    from gamma.core.terms.errors import InputError

    lines = list(LINES)
    if where == "a tenant with no actor":
        line = 120
        tenant = json.loads(lines[line - 1])["tenant"]
        actors = [a for a in ACTORS if a.tenant != tenant]
    else:
        line = next(i for i, t in enumerate(lines, 1) if parse_ts(json.loads(t)["ts"]) > AT)
        actors = ACTORS
    row = json.loads(lines[line - 1])
    lines[line - 1] = json.dumps({**row, "colour": 1})
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    for name, executor in (("s", serial), ("p", pool(2))):
        with pytest.raises(InputError) as exc:
            run_review(log, actors, AT, DEFAULT_POLICY, tmp_path / name, executor=executor)
        assert (exc.value.line, exc.value.field) == (line, "colour")
        assert [p.name for p in (tmp_path / name).rglob("*") if p.is_file()] == []


def test_store_review_equals_jsonl_review(tmp_path: Path) -> None:
    from gamma.storage.store import Store

    with Store.init(tmp_path / "log.db") as store:
        store.append(LINES)
    run_review(tmp_path / "log.db", ACTORS, AT, None, tmp_path / "a", executor=pool(2))
    run_review(LINES, ACTORS, AT, None, tmp_path / "b")
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_each_record_replays_under_its_own_policy(tmp_path: Path) -> None:
    """Records made under the default and under strict, in one directory: each is replayed
    under the policy it names; a given policy overrides that and the others differ."""
    from gamma.audit.replay import write_audit
    from gamma.data import policy_by_name
    from gamma.review.run import run_replays

    strict = policy_by_name("strict")
    assert strict.digest != DEFAULT_POLICY.digest
    prefix = EVENTS[:300]
    at = parse_ts(tenants.ts(299))
    records = {}
    for i, actor in enumerate(ACTORS[:8]):
        policy = strict if i % 2 else DEFAULT_POLICY
        path = tmp_path / f"{actor.id}.json"
        records[path.name] = write_audit(path, gamma.resolve(prefix, actor, at, policy), prefix)
    outcomes, failed = run_replays(LINES, records)
    assert not failed and [o.ok for o in outcomes] == [True] * 8, [o.text for o in outcomes]
    assert {o.result["policy"]["replay"] for o in outcomes} == {strict.digest, DEFAULT_POLICY.digest}
    forced, _ = run_replays(LINES, records, DEFAULT_POLICY)
    wrong = {o.name for o in forced if not o.ok}
    assert wrong == {n for n, r in records.items() if r["policy"] == strict.digest}
    assert all("policy: the record was made under" in o.text for o in forced if not o.ok)


def test_cli_review_bad_line_exits_2_and_replays_mixed_policies(tmp_path: Path, capsys: Any) -> None:
    from gamma.audit.replay import write_audit
    from gamma.data import policy_by_name

    lines = list(LINES)
    lines[40] = lines[40].replace('"actor": "crm"', '"actor": "crm", "colour": 1')
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    actors = tmp_path / "actors.jsonl"
    actors.write_text("".join(json.dumps(a) + "\n" for a in ACTOR_OBJS))
    code, _ = _gamma(capsys, "review", log, "--actors", actors, "--at", tenants.ts(350),
                     "--out", tmp_path / "out", "--workers", "2")  # fmt: skip
    assert code == 2 and not (tmp_path / "out" / "summary.json").exists()
    log.write_text("\n".join(LINES) + "\n")
    where = tmp_path / "records"
    where.mkdir()
    prefix, at = EVENTS[:300], parse_ts(tenants.ts(299))
    for i, actor in enumerate(ACTORS[:4]):
        policy = policy_by_name("strict") if i % 2 else DEFAULT_POLICY
        write_audit(where / f"{actor.id}.json", gamma.resolve(prefix, actor, at, policy), prefix)
    code, out = _gamma(capsys, "replay", log, "--records", where, "--workers", "2")
    assert code == 0 and "4 of 4 records identical" in out, out


def test_a_line_past_the_limit_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """The spool reads a file a line at a time, none past SPEC §18's line limit: an endless
    line is a LimitError naming the line, read no further than the limit."""
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"\n".join(line.encode() for line in LINES) + b"\n" + b"x" * (1 << 21))
    with pytest.raises(gamma.LimitError) as caught:
        run_review(str(log), ACTORS, AT, DEFAULT_POLICY, tmp_path / "out")
    assert caught.value.line == len(LINES) + 1
