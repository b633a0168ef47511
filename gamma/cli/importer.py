"""``gamma import statebench``: StateBench timelines into gamma conformance cases."""

from __future__ import annotations

import click

from gamma.cli.logs import command
from gamma.core.terms.canonical import compact_json


@click.group("import")
def import_group() -> None:
    """Convert other benchmarks' data into gamma logs and conformance cases."""


@import_group.command("statebench")
@click.argument("timelines", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory for the cases.")
def statebench_command(timelines: str, out_dir: str) -> None:
    """Convert StateBench TIMELINES.jsonl into one case per timeline in --out.

    Writes DIR/<timeline id>.json and DIR/unmapped.jsonl (what only prose
    carried, per timeline); `gamma conformance DIR` runs the cases.
    """
    # lazy: the importer is large and only this command needs it
    from gamma.conformance.statebench.importer import import_file

    with command("import statebench", timelines=timelines, out=out_dir) as record:
        report = import_file(timelines, out_dir)
        summary = {
            "cases": report.cases,
            "timelines": report.timelines,
            "unmapped": report.unmapped,
            "unmapped_by_kind": dict(report.unmapped_by_kind),
        }
        click.echo(compact_json(summary))
        record.update(cases=report.cases, unmapped=report.unmapped)
