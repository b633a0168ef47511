"""``gamma conformance``: run the fixture suite against Γ, a built-in reader or a system.

The runner (``gamma.conformance``) is pure; this module adds its two report formats,
text for people and JUnit XML for CI, and the exit status.
"""

from __future__ import annotations

import math
import os
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gamma.cli import exit_with
from gamma.cli.logs import command
from gamma.cli.options import output_path
from gamma.cli.score import render_score
from gamma.conformance.cases import SUITES, load_cases
from gamma.conformance.readers import READERS
from gamma.conformance.runner import CaseResult, Report, quote, run
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.errors import InputError
from gamma.data import corpus_dir
from gamma.scoring.metrics import Rate


@click.command("conformance")
@click.argument("paths", nargs=-1, metavar="[PATH]...", type=click.Path())
@click.option("--suite", type=click.Choice(SUITES), default=None, help="Run only this suite's cases.")
@click.option("--junit", "junit", type=click.Path(dir_okay=False), default=None,
              help="Also write JUnit XML here (one testcase per case, grouped by suite).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (sorted keys).")
@click.option("--system", "system", metavar="CMD", default=None,
              help="Test an external system: a command speaking the JSON-lines protocol.")
@click.option("--reader", "reader", type=click.Choice(list(READERS)), default=None,
              help="Test a built-in reader baseline instead of the reference resolver.")
@click.option("--audit", is_flag=True, help="Also run the admissibility audit of the pairs; "
              "a rejected pair fails the run.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True, metavar="SECONDS", help="Per-case reply timeout for --system.")
def conformance_command(
    paths: tuple[str, ...], suite: str | None, junit: str | None, as_json: bool,
    system: str | None, reader: str | None, audit: bool, timeout: float,
) -> None:
    """Run conformance cases (default: the corpus bundled with gamma) and print the results.

    PATH is a case file or a directory of them (e.g. the output of gamma import
    statebench); with none, the corpus that ships inside the package runs, from
    any directory.

    Exit 0 when every case passes (and, with --audit, every pair is admissible), 1 when
    a case fails or errs, 2 on bad input.
    """
    if system is not None and reader is not None:
        raise click.UsageError("give --system or --reader, not both")
    if not math.isfinite(timeout):
        raise click.BadParameter("must be a finite number of seconds", param_hint="'--timeout'")
    if junit is not None:
        output_path(junit, flag="--junit")
    paths = paths or (str(corpus_dir()),)
    with command("conformance", paths=list(paths), suite=suite, reader=reader,
                 system=system) as record:
        cases = load_cases(paths, suite=suite)
        if not cases:
            raise InputError("no conformance cases found" + (f" in suite {suite!r}" if suite else ""),
                             source=", ".join(paths))
        report = run(cases, reader=reader, system=system, timeout=timeout, audit=audit)
        if junit is not None:
            _write(Path(junit), junit_xml(report))
        click.echo(compact_json(report.to_dict()) if as_json else render_report(report))
        record.update(kind=report.kind, ok=report.ok, **report.summary())
    exit_with(report.exit_code)


def _write(path: Path, text: str) -> None:
    """Write atomically, so a CI job never reads half a report."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=".junit-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write JUnit XML: {exc.strerror or exc}", source=str(path)) from None


_TITLES = {"reference": "the reference resolver", "reader": "the reader", "external": "the system"}


def render_report(report: Report) -> str:
    """The report for people: one line per case (problems indented), then the metrics."""
    title = _TITLES[report.kind] + ("" if report.kind == "reference" else f" {report.name}")
    out = [f"gamma conformance: {title}, {len(report.results)} cases", ""]
    for r in report.results:
        note = " [in the trap's signature]" if r.in_signature and r.status == "fail" else ""
        out.append(f"{r.status.upper():<5} {r.suite:<14} {r.id}{note}")
        for problem in r.problems:
            short = problem if len(problem) <= 300 else problem[:300] + " ... (--json has it all)"
            out.append(f"        - {short}")
    summary = report.summary()
    out += ["", "SUMMARY " + ", ".join(f"{summary[k]} {k}" for k in summary),
            f"  {'suite':<15} {'cases':>5} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}"]
    for suite, c in report.metrics["suites"].items():
        out.append(f"  {suite:<15} {c['cases']:>5} {c['passed']:>7} {c['failed']:>7} "
                   f"{c['errors']:>7} {c['skipped']:>8}")
    out += ["", render_score({**report.metrics, "findings": []})]
    if report.metrics["traps"]:
        out += ["", "TRAPS  mode        accuracy"]
        for mode, rate in report.metrics["traps"].items():
            out.append(f"       {mode:<11} {Rate(rate['k'], rate['n'])}")
    if "signature" in report.metrics:
        s = report.metrics["signature"]
        out.append(f"       failing a trap agrees with its signature: {Rate(s['k'], s['n'])}")
    if report.audit is not None:
        out += ["", *_audit_lines(report.audit.to_dict())]
    out += ["", "OK" if report.ok else "FAILED"]
    return "\n".join(out)


def _audit_lines(audit: dict[str, Any]) -> list[str]:
    head = (f"AUDIT  {len(audit['pairs'])} pairs: {audit['admitted']} admissible, "
            f"{audit['rejected']} rejected; mean similarity {audit['mean_similarity']}, "
            f"mean text similarity {audit['mean_text_similarity']}")
    lines = [head]
    for p in audit["pairs"]:
        verdict = "ok      " if p["admissible"] else "REJECTED"
        lines.append(f"  {verdict} {p['pair']:<40} {p['axis'] or '-':<20} similarity "
                     f"{p['similarity']:.4f}  text {p['text_similarity']:.4f}  "
                     f"variable {','.join(p['variable']) or '-'}")
        lines += [f"           - {problem}" for problem in p["problems"]]
    return lines


# -- JUnit XML -------------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot carry written as escapes."""
    return "".join(
        ch if ch in "\t\n\r" or (" " <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd")
        or ch > "\uffff" else f"\\u{ord(ch):04x}"
        for ch in text
    )


def _count(node: ET.Element, rows: Sequence[CaseResult]) -> None:
    node.set("tests", str(len(rows)))
    for attr, status in (("failures", "fail"), ("errors", "error"), ("skipped", "skip")):
        node.set(attr, str(sum(r.status == status for r in rows)))
    node.set("time", _seconds(sum(r.seconds for r in rows)))


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _failure_message(r: CaseResult) -> str:
    """The failure's message: the first expectation that failed (they all are in the body)."""
    first = r.problems[0] if r.problems else f"the case {r.status}ed"
    more = f" (and {len(r.problems) - 1} more)" if len(r.problems) > 1 else ""
    return _xml_text((first if len(first) <= 500 else first[:500] + "...") + more)


def junit_xml(report: Report) -> str:
    """JUnit XML: one ``testsuite`` per case suite, one ``testcase`` per case, each with its
    ``time``; a failure's message names the expectation that failed; what an external
    system wrote on stderr during a case is its ``system-err`` (the last 64 KiB)."""
    root = ET.Element("testsuites", name="gamma conformance")
    grouped: dict[str, list[CaseResult]] = defaultdict(list)
    for r in report.results:
        grouped[r.suite].append(r)
    _count(root, report.results)
    for suite, rows in sorted(grouped.items()):
        node = ET.SubElement(root, "testsuite", name=suite)
        _count(node, rows)
        for r in rows:
            case = ET.SubElement(node, "testcase", name=_xml_text(r.id),
                                 classname=f"gamma.conformance.{suite}",
                                 time=_seconds(r.seconds))
            answer = (f"answer: {quote(r.answer)}",) if r.scored else ()
            detail = "\n".join((*r.problems, *answer, f"case: {r.where}"))
            if r.status in ("fail", "error"):
                tag = "failure" if r.status == "fail" else "error"
                child = ET.SubElement(case, tag, message=_failure_message(r),
                                      type="mismatch" if tag == "failure" else "system")
                child.text = _xml_text(detail)
            elif r.status == "skip":
                ET.SubElement(case, "skipped", message="nothing to check for this system")
            if r.stderr:
                ET.SubElement(case, "system-err").text = _xml_text(r.stderr)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
