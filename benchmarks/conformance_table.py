"""Print the README's conformance table: the reference resolver and every built-in reader.

    python benchmarks/conformance_table.py [PATH ...] [--suite NAME]

Each row is what ``gamma conformance PATH --json`` (first row) or ``gamma conformance
PATH --reader NAME --json`` reports, through the same function (``gamma.conformance.run``);
PATH defaults to ``fixtures/``. Rates are percentages of the shown denominators; the
always-refuse baseline of the factorial is printed under the table.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from gamma.conformance.cases import MODES, load_cases
from gamma.conformance.readers import READERS
from gamma.conformance.runner import Report, run

COLUMNS = ("system", "passed", "pair accuracy", "Δ", "factorial", "correct rejection",
           "false refusal", "GBR", "URR", "gold", "drift", *MODES)


def _pct(k: int, n: int) -> str:
    return "n/a" if not n else f"{100 * k / n:.1f}%"


def _rate(rate: Mapping[str, Any]) -> str:
    return _pct(rate["k"], rate["n"])


def row(name: str, report: Report) -> list[str]:
    """One table row from a report's metrics."""
    m = report.metrics
    pairs = m["pairs"].values()
    total = sum(p["pairs"] for p in pairs)
    both = sum(p["pair_accuracy"]["k"] for p in pairs)
    delta = sum(p["positive"]["k"] - p["counterfactual"]["k"] for p in pairs)
    f, pool = m["factorial"], m["pool"]
    return [
        name,
        f"{report.count('pass')}/{len(report.results)}",
        _pct(both, total),
        "n/a" if not total else f"{100 * delta / total:+.1f}",
        _rate(f["accuracy"]),
        _rate(f["correct_rejection"]),
        _rate(f["false_refusal"]),
        _rate(m["gbr"]),
        _rate(m["urr"]),
        _pct(pool["gold"], pool["n"]),
        _pct(pool["drift"], pool["n"]),
        *(_rate(m["traps"][mode]) if mode in m["traps"] else "n/a" for mode in MODES),
    ]


def table(paths: list[str], suite: str | None = None) -> str:
    """The markdown table for the cases under ``paths``."""
    cases = load_cases(paths, suite=suite)
    reports = [("reference resolver (default)", run(cases))]
    reports += [(f"`--reader {name}`", run(cases, reader=name)) for name in READERS]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(name, report)) + " |" for name, report in reports]
    baseline = reports[0][1].metrics["factorial"]["always_refuse_accuracy"]
    note = (f"{len(cases)} cases. Factorial always-refuse baseline: "
            f"{baseline['k']}/{baseline['n']} = {_rate(baseline)}.")
    lines += ["", note]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["fixtures/"])
    parser.add_argument("--suite", default=None)
    args = parser.parse_args()
    print(table(args.paths, args.suite))


if __name__ == "__main__":
    main()
