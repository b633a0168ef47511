"""Golden cases: a log, an actor, a time and a policy in; the exact resolution and context out.

Each ``tests/golden/<case>.json`` holds ``description``, ``log`` (the events),
``actor``, ``at``, ``policy`` (null for the built-in default, else the name of
a file in ``policies/``), ``expected`` (the resolution JSON of DESIGN §6) and
``context`` (the lines of ``--format context``). A change of semantics shows
as a reviewed diff of these files. To rewrite the expected outputs after an
intended change, run

    GAMMA_UPDATE_GOLDEN=1 pytest tests/test_golden.py

and review ``git diff tests/golden`` line by line before committing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gamma import (
    DEFAULT_POLICY,
    Policy,
    Resolution,
    load_policy,
    parse_actor,
    parse_events,
    resolve,
)
from gamma.core.resolving.resolution import FORMAT
from gamma.core.terms.version import __version__ as gamma_version

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
POLICIES = HERE.parent / "policies"
CASES = sorted(GOLDEN.glob("*.json"))
UPDATE = os.environ.get("GAMMA_UPDATE_GOLDEN") == "1"
FIELDS = {"description", "log", "actor", "at", "policy", "expected", "context"}


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _lines(items: list[Any], indent: str) -> str:
    """A JSON list with one compact item per line (readable diffs)."""
    if not items:
        return "[]"
    inner = ",\n".join(indent + "  " + json.dumps(item, ensure_ascii=False) for item in items)
    return "[\n" + inner + "\n" + indent + "]"


def dump_case(case: dict[str, Any]) -> str:
    """The case as JSON laid out for review: one event, record entry or context line per line."""
    out = []
    for key, value in case.items():
        if isinstance(value, list):
            text = _lines(value, "  ")
        elif key == "expected" and isinstance(value, dict):
            inner = ",\n".join(
                f"    {json.dumps(k)}: "
                + (_lines(v, "    ") if isinstance(v, list) else json.dumps(v, ensure_ascii=False))
                for k, v in value.items()
            )
            text = "{\n" + inner + "\n  }"
        else:
            text = json.dumps(value, ensure_ascii=False)
        out.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(out) + "\n}\n"


def load_case(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return case


def policy_of(case: dict[str, Any]) -> Policy:
    return (
        DEFAULT_POLICY
        if case["policy"] is None
        else load_policy(POLICIES / f"{case['policy']}.toml")
    )


def resolve_case(path: Path, case: dict[str, Any]) -> Resolution:
    policy = policy_of(case)
    lines = [json.dumps(event, ensure_ascii=False) for event in case["log"]]
    events = parse_events(lines, policy=policy, source=path.name)
    return resolve(events, parse_actor(case["actor"], policy=policy), case["at"], policy)


class TestGolden:
    def test_there_are_golden_cases(self) -> None:
        """The golden directory is not empty (a bad glob would make every other test vanish)."""
        assert len(CASES) >= 10

    @pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
    def test_golden(self, path: Path) -> None:
        """Γ over the case's inputs reproduces the expected resolution byte for byte, and the context."""
        case = load_case(path)
        res = resolve_case(path, case)
        if UPDATE:
            case["expected"] = res.to_dict()
            case["context"] = res.render("context").splitlines()
            path.write_text(dump_case(case), encoding="utf-8")
            pytest.skip("golden file rewritten; review the diff")
        assert set(case) == FIELDS, "a golden case has exactly the documented fields"
        assert res.to_dict() == case["expected"]
        assert res.to_json() == canonical(case["expected"])
        assert res.render("context").splitlines() == case["context"]

    @pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
    def test_golden_record_is_self_consistent(self, path: Path) -> None:
        """Each expected digest is the sha256 of its own body, and its policy digest the case's."""
        case = load_case(path)
        body = dict(case["expected"])
        digest = body.pop("digest")
        assert (body.pop("engine"), body.pop("format")) == (gamma_version, FORMAT)  # undigested
        assert digest == hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()
        assert body["policy"] == policy_of(case).digest
        assert Resolution.from_dict(case["expected"]).to_dict() == case["expected"]
