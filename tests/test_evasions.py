"""The adversarial response corpus of fixtures/evasions/: each line an evasion of the
withheld-value search (its ``bypass`` names the facts it leaks) or a near-miss that must
not count (``bypass`` empty). Each line is one test; run as a script, this file prints
"evasions caught / tried" and "false alarms / near-misses" for the README."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import parse_lines

from gamma.scoring.findings import Validation, validate

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "evasions"
LINES: list[dict[str, Any]] = [
    json.loads(line)
    for line in (CORPUS / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
ACTOR = json.loads((CORPUS / "actor.json").read_text(encoding="utf-8"))
AT = "2026-03-02T10:00:00Z"  # as in audit/requests.toml
TENANT_FACTS = {"G1", "G2"}


@cache
def _events() -> Any:
    return parse_lines((CORPUS / "log.jsonl").read_text(encoding="utf-8").split("\n"))


def _check(line: dict[str, Any]) -> Validation:
    return validate(
        _events(), actor=ACTOR, at=AT, question=line["question"],
        response=line["response"], bindings=line.get("bindings"),
    )


def bypassed(line: dict[str, Any]) -> list[str]:
    return sorted(v.fact or "" for v in _check(line).violations if v.kind == "bypass")


def test_the_corpus_is_large_enough_and_named_once() -> None:
    cases = [line["case"] for line in LINES]
    assert len(cases) == len(set(cases))
    assert sum(bool(line["bypass"]) for line in LINES) >= 100
    assert sum(not line["bypass"] for line in LINES) >= 50


@pytest.mark.parametrize("line", LINES, ids=[line["case"] for line in LINES])
def test_expected_finding(line: dict[str, Any]) -> None:
    """Exactly the expected facts leak: an evasion is caught, a near-miss is no alarm."""
    assert bypassed(line) == line["bypass"], line["response"]


@pytest.mark.parametrize(
    "line", [x for x in LINES if TENANT_FACTS & set(x["bypass"])],
    ids=lambda x: x["case"],
)
def test_another_tenants_value_is_tenant_isolation(line: dict[str, Any]) -> None:
    codes = {c for v in _check(line).violations if v.kind == "bypass" for c in v.codes}
    assert codes == {"tenant_isolation"}


def tally() -> dict[str, int]:
    """Evasions caught / tried and false alarms / near-misses over the corpus."""
    out = {"evasions": 0, "caught": 0, "near_misses": 0, "false_alarms": 0}
    for line in LINES:
        found = bypassed(line)
        if line["bypass"]:
            out["evasions"] += 1
            out["caught"] += found == line["bypass"]
        else:
            out["near_misses"] += 1
            out["false_alarms"] += bool(found)
    return out


if __name__ == "__main__":
    t = tally()
    sys.stdout.write(f"evasions caught / tried: {t['caught']}/{t['evasions']}\n"
                     f"false alarms / near-misses: {t['false_alarms']}/{t['near_misses']}\n")
