"""``gamma review``: an access review of every actor, partitioned by tenant.

Exit 0 when every tenant's review was written, 1 when a tenant's job failed
(the others are still written), 2 on input errors.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import structlog

from gamma.audit.replay import read_audit
from gamma.cli import exit_with, quiet, verbose, warn
from gamma.cli.audit import replay_one_command as single
from gamma.cli.logs import command
from gamma.cli.options import log_argument, policy_option, read_at, read_policy, read_text
from gamma.core.reading.events import parse_actor
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import Policy
from gamma.integrations import install_hint
from gamma.review.run import (
    Executor,
    TaskFailure,
    TaskOutcome,
    pool,
    run_replays,
    run_review,
    serial,
)
from gamma.review.spool import open_source
from gamma.review.tasks import ReviewTask
from gamma.storage.decisions import decision_log_path
from gamma.storage.store import Store

if TYPE_CHECKING:  # types only: the serve room loads when --decisions asks for it
    from gamma.serve.replay import Refusal
    from gamma.serve.types import Handler

__all__ = ["review_command", "replay_command", "executor_for"]

#: The most --workers: processes beyond this many only queue (and the OS refuses far more).
MAX_WORKERS = 256


def read_actors(path: str, policy: Policy) -> list[Actor]:
    """One actor object per line (blank lines skipped); at least one."""
    text, source = read_text(path, "--actors")
    actors: list[Actor] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        obj = decode_json(line, source=source, line=number)
        actors.append(parse_actor(obj, policy=policy, source=f"{source}:{number}"))
    if not actors:
        raise InputError("no actors: expected one JSON object per line", source=source)
    return actors


def executor_for(workers: int | None, scheduler: str | None) -> tuple[Executor, Any]:
    """The executor the flags ask for, and a Dask client to close (or None)."""
    if workers is not None and scheduler is not None:
        raise click.UsageError("give --workers or --scheduler, not both")
    if scheduler is not None:
        try:  # lazy: Dask is an optional extra, loaded only when --scheduler asks for it
            from distributed import Client

            from gamma.review.on_dask import dask
        except ImportError:
            raise click.UsageError(f"--scheduler needs Dask: {install_hint('dask')}") from None
        client = Client(scheduler)  # type: ignore[no-untyped-call]
        return dask(client), client
    if workers is None or workers <= 1:
        return serial, None
    return pool(workers), None


def scheduler_options(func: Any) -> Any:
    func = click.option(
        "--scheduler", default=None, metavar="ADDRESS",
        help="Run on a Dask cluster (tcp://host:8786; needs the dask extra).",
    )(func)  # fmt: skip
    return click.option(
        "--workers", type=click.IntRange(min=1, max=MAX_WORKERS), default=None, metavar="N",
        help="Run on a process pool of N workers on this machine (default: serial).",
    )(func)  # fmt: skip


@click.command("review")
@log_argument
@click.option("--actors", "actors_path", required=True, type=click.Path(dir_okay=False),
              metavar="ACTORS.jsonl", help="The actors to review, one JSON object per line.")
@click.option("--at", "at", required=True, metavar="TS", help="Review time (RFC 3339).")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Directory for tenants/*.jsonl and summary.json.")
@click.option("--since", "since", default=None, metavar="T0",
              help="Also list each actor's gains and losses between T0 and --at.")
@scheduler_options
@policy_option
def review_command(
    log: str, actors_path: str, at: str, out: str, since: str | None,
    workers: int | None, scheduler: str | None, policy_path: str | None,
) -> None:  # fmt: skip
    """Review LOG: every actor's resolution at --at, and who may see each restricted fact.

    Writes DIR/tenants/TENANT.jsonl (one line per actor: its resolution and
    digest, and with --since its changes) and DIR/summary.json (per tenant, per
    restricted fact: the actors admitted it and the codes withholding it from
    the others). Each tenant is one job; the output is byte-identical whatever
    --workers or --scheduler ran it.
    """
    with command("review", log=log, out=out) as record:
        at_ts = read_at(at)
        since_ts = read_at(since, flag="--since") if since is not None else None
        source = open_source(log, read_policy(policy_path) if policy_path else None)
        actors = read_actors(actors_path, source.policy)
        _check_folder(out)
        executor, client = executor_for(workers, scheduler)
        tenants = len({a.tenant for a in actors})
        events: dict[str, int] = {}  # tenant -> its events, as each tenant's job ends
        progress = _progress(tenants) if not quiet() else None
        try:
            with progress or contextlib.nullcontext() as show:

                def done(task: ReviewTask, outcome: TaskOutcome) -> None:
                    events[task.tenant] = task.ship.events
                    if show is not None:
                        show(task, outcome)

                summary = run_review(source, actors, at_ts, None, out, since=since_ts,
                                     executor=executor, on_done=done)  # fmt: skip
        finally:
            if client is not None:
                client.close()
            if source.store is not None:
                source.store.close()
        record.update(events=summary["events"], actors=len(actors), tenants=tenants,
                      failed=len(summary["failed"]))  # fmt: skip
        for tenant in sorted(t for t, n in events.items() if n == 0):
            warn(f"tenant {tenant!r} occurs nowhere in the log: nothing is admitted to its actors")
        for failure in summary["failed"]:
            click.echo(f"failed: tenant {failure['tenant']}: {failure['error']}", err=True)
        click.echo(f"reviewed {len(actors)} actors in {tenants - len(summary['failed'])}"
                   f" of {tenants} tenants; wrote {out}")  # fmt: skip
        if summary["failed"]:
            exit_with(1)


Progress = Callable[[ReviewTask, TaskOutcome], None]


def _check_folder(out: str) -> None:
    """``--out``: a folder, or one that can be made (its nearest existing ancestor is a folder);
    checked before the work, so a path through a file is an input error naming the flag."""
    path = Path(out).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        raise InputError(f"cannot make the folder {out}: {str(path)!r} is a file", source="--out")


@contextlib.contextmanager
def _progress(tenants: int) -> Iterator[Progress | None]:
    """Each tenant's end as progress: a bar on a terminal, a log line when the log was asked
    for (``-v``), else nothing (a success writes no structured line unasked)."""
    started = time.perf_counter()
    if sys.stderr.isatty():
        with click.progressbar(length=tenants, label="tenants", file=sys.stderr) as bar:
            seen = [0]

            def tick(task: ReviewTask, outcome: TaskOutcome) -> None:
                seen[0] += task.ship.events
                rate = seen[0] / max(time.perf_counter() - started, 1e-9)
                bar.label = f"tenants ({rate:,.0f} events/s)"
                bar.update(1)

            yield tick
    elif verbose():
        log_line = structlog.get_logger("gamma")

        def line(task: ReviewTask, outcome: TaskOutcome) -> None:
            log_line.info("tenant", tenant=task.tenant, events=task.ship.events,
                          actors=len(task.actors), failed=isinstance(outcome, TaskFailure))  # fmt: skip

        yield line
    else:
        yield None


def _records_replay(log: str, records_dir: str, policy_path: str | None,
                    workers: int | None, scheduler: str | None, as_json: bool) -> None:  # fmt: skip
    """Replay every *.json audit record in records_dir by tenant; one line each and a summary."""
    with command("replay", log=log, records=records_dir) as record:
        explicit = read_policy(policy_path) if policy_path else None
        paths = sorted(p for p in Path(records_dir).glob("*.json") if p.is_file())
        records = {p.name: read_audit(p) for p in paths}
        executor, client = executor_for(workers, scheduler)
        try:
            outcomes, failed = run_replays(log, records, explicit, executor=executor)
        finally:
            if client is not None:
                client.close()
        for o in outcomes:
            if as_json:
                click.echo(json.dumps({"record": o.name, **o.result}, sort_keys=True))
            else:
                first, *rest = o.text.rstrip("\n").split("\n")
                click.echo(f"{o.name}: {first}")
                for extra in rest if not o.ok else []:
                    click.echo(f"  {extra}")
        for f in failed:
            click.echo(f"failed: tenant {f.tenant}: {f.error}", err=True)
        same = sum(o.ok for o in outcomes)
        click.echo(f"{same} of {len(records)} records identical, {len(outcomes) - same} different,"
                   f" {len(records) - len(outcomes)} not replayed")  # fmt: skip
        record.update(records=len(records), identical=same, failed=len(failed))
        if same != len(records):
            exit_with(1)


def server_decisions(store: str, callers_path: str | None) -> tuple[Mapping[str, Handler], Refusal]:
    """The server's decision handlers by endpoint name (subject search bound to the callers of
    ``callers_path``, the server's callers file; none when not given) and its refusals."""
    # lazy: the serve room (AuthZEN, resolve, check, explain) loads only when --decisions asks
    from gamma.serve.endpoints import handlers
    from gamma.serve.identity import Callers
    from gamma.serve.service import refusal

    if callers_path is None:
        return handlers(()), refusal
    with Store.open(store, read_only=True) as opened:
        policy = opened.policy
    return handlers(Callers.load(callers_path, policy=policy)), refusal


def _decisions_replay(store: str, callers_path: str | None, as_json: bool) -> None:
    """Replay STORE's decision log (STORE.decisions): a summary, or one JSON line."""
    from gamma.serve.replay import replay_decisions  # lazy: as server_decisions

    with command("replay", log=store, decisions=str(decision_log_path(store))) as record:
        handlers, refusal = server_decisions(store, callers_path)
        result = replay_decisions(store, handlers=handlers, refusal=refusal)
        if as_json:
            click.echo(json.dumps(result.to_dict(), sort_keys=True))
        else:
            click.echo(result.render(), nl=False)
        record.update(entries=result.entries, replayed=result.replayed,
                      different=result.different, chain=result.chain.ok)  # fmt: skip
    if not result.ok:
        exit_with(1)


def _replay_with_records() -> click.Command:
    """``gamma replay`` with ``--records DIR`` or ``--decisions``: the audit command's options
    plus ours.

    Without either it is ``gamma replay --expect`` unchanged (gamma.cli.audit).
    """
    def callback(**kwargs: Any) -> None:
        records_dir = kwargs.pop("records_dir")
        workers, scheduler = kwargs.pop("workers"), kwargs.pop("scheduler")
        callers_path = kwargs.pop("callers_path")
        if callers_path is not None and not kwargs.get("decisions"):
            raise click.UsageError("--callers goes with --decisions")
        if kwargs.pop("decisions"):
            given = [flag for flag, value in (("--expect", kwargs.get("expect")),
                     ("--records", records_dir), ("--policy", kwargs.get("policy_path")),
                     ("--workers", workers), ("--scheduler", scheduler)) if value is not None]  # fmt: skip
            if given:
                raise click.UsageError(f"--decisions replays a store's decision log: drop {', '.join(given)}")
            _decisions_replay(kwargs["log"], callers_path, bool(kwargs.get("as_json")))
            return
        if records_dir is None:
            if kwargs.get("expect") is None:
                raise click.UsageError("give --expect AUDIT.json, --records DIR or --decisions")
            if workers is not None or scheduler is not None:
                raise click.UsageError("--workers and --scheduler go with --records")
            click.get_current_context().invoke(single, **kwargs)
            return
        if kwargs.get("expect") is not None:
            raise click.UsageError("give --expect or --records, not both")
        _records_replay(kwargs["log"], records_dir, kwargs.get("policy_path"), workers,
                        scheduler, bool(kwargs.get("as_json")))  # fmt: skip

    params = []
    for param in single.params:
        if isinstance(param, click.Option) and param.name == "expect":
            param = click.Option(param.opts, type=param.type, required=False,
                                 metavar=param.metavar, help=param.help)  # fmt: skip
        params.append(param)
    params += [
        click.Option(["--records", "records_dir"], type=click.Path(file_okay=False),
                     metavar="DIR", default=None,
                     help="Replay every *.json audit record in DIR, by tenant."),
        click.Option(["--workers"], type=click.IntRange(min=1, max=MAX_WORKERS), default=None, metavar="N",
                     help="With --records: a process pool of N workers."),
        click.Option(["--scheduler"], default=None, metavar="ADDRESS",
                     help="With --records: a Dask cluster (needs the dask extra)."),
        click.Option(["--decisions"], is_flag=True, default=False,
                     help="Replay the decision log gamma serve wrote beside the store LOG"
                     " (LOG.decisions)."),
        click.Option(["--callers", "callers_path"], type=click.Path(dir_okay=False),
                     metavar="CALLERS.toml", default=None,
                     help="With --decisions: the server's callers file (subject search lists them)."),
    ]  # fmt: skip
    help_text = (single.help or "") + (
        "\n\nWith --records DIR, replays every audit record in DIR, partitioned by"
        " tenant (--workers N or --scheduler ADDRESS); exit 0 only if all are identical."
        "\n\nWith --decisions, LOG is a store served by gamma serve: verifies the hash chain"
        " of LOG.decisions, runs every decision again over exactly the events it saw, as its"
        " caller at its time, and compares the responses byte for byte, and finds every"
        " write's events in LOG; exit 0 all the same, 1 a difference or a broken chain."
    )
    return click.Command("replay", callback=callback, params=params, help=help_text,
                         short_help=single.get_short_help_str())  # fmt: skip


replay_command = _replay_with_records()
