"""Print the README's conformance table: the reference resolver and every built-in reader.

    python benchmarks/conformance_table.py [PATH ...] [--suite NAME]

Each row is what ``gamma conformance PATH --json`` (first row) or ``gamma conformance
PATH --reader NAME --json`` reports, through the same function (``gamma.conformance.run``);
PATH defaults to ``fixtures/``. Rates are percentages of the shown denominators; the
always-refuse baseline of the factorial is printed under the table. The ``recompute`` column
is the share of the cases under the ``recompute`` policy (issue 29: stated derivations that Γ
recomputes) that the system passes; the second row runs Γ with those cases moved to the
``default`` policy (their derivations then change nothing), so the two rows show what
``recompute`` adds.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gamma.conformance.cases import MODES, Case, load_cases
from gamma.conformance.readers import READERS
from gamma.conformance.runner import Report, run
from gamma.core.terms.policy import DEFAULT_POLICY

COLUMNS = ("system", "passed", "pair accuracy", "Δ", "factorial", "correct rejection",
           "false refusal", "GBR", "URR", "gold", "drift", *MODES, "recompute")

#: The named policy whose cases the last column counts.
RECOMPUTE = "recompute"


def _pct(k: int, n: int) -> str:
    return "n/a" if not n else f"{100 * k / n:.1f}%"


def _rate(rate: Mapping[str, Any]) -> str:
    return _pct(rate["k"], rate["n"])


def row(name: str, report: Report, recompute: frozenset[str] = frozenset()) -> list[str]:
    """One table row from a report's metrics; ``recompute``: the ids of the recompute cases."""
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
        _pct(sum(r.status == "pass" for r in report.results if r.id in recompute), len(recompute)),
    ]


def without_recompute(cases: Sequence[Case]) -> list[Case]:
    """The cases, those under ``recompute`` moved to the built-in default policy."""
    return [attrs.evolve(c, policy="default", policy_object=DEFAULT_POLICY)
            if c.policy == RECOMPUTE else c for c in cases]


def table(paths: list[str], suite: str | None = None) -> str:
    """The markdown table for the cases under ``paths``."""
    cases = load_cases(paths, suite=suite)
    reports = [("reference resolver (default)", run(cases)),
               (f"reference resolver, `{RECOMPUTE}` cases under `default`",
                run(without_recompute(cases)))]
    reports += [(f"`--reader {name}`", run(cases, reader=name)) for name in READERS]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    recompute = frozenset(case.id for case in cases if case.policy == RECOMPUTE)
    lines += ["| " + " | ".join(row(name, report, recompute)) + " |" for name, report in reports]
    baseline = reports[0][1].metrics["factorial"]["always_refuse_accuracy"]
    note = (f"{len(cases)} cases ({len(recompute)} under the `{RECOMPUTE}` policy). Factorial "
            f"always-refuse baseline: {baseline['k']}/{baseline['n']} = {_rate(baseline)}.")
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
