"""A fact whose deferred (``valid_from``) effect is pending, made moot by a later append: its
effect never happens (``take_effect`` skips a fact no longer live), so the facts it would
have superseded stay live. The engine must compute their keys again (found by review: the
append's journal named the new fact's keys and the moot fact's, not its targets')."""

from __future__ import annotations

import json
from typing import Any

import pytest

import gamma

WRITER = {"actor": "w", "tenant": "acme"}
WHO = {"id": "ann", "tenant": "acme"}
AT = "2026-03-10T00:00:00Z"


def event(n: int, **fields: Any) -> dict[str, Any]:
    return {"id": f"e{n}", "ts": f"2026-03-01T09:0{n}:00Z", **WRITER, **fields}


#: F2 supersedes F1 (another key) from 2026-03-05, after the log's last event, before AT.
HEAD = [
    event(1, type="assert", fact="F1", key="a", value=1),
    event(2, type="assert", fact="F2", key="b", value=2, supersedes=["F1"],
          valid_from="2026-03-05T00:00:00Z"),
]  # fmt: skip
#: Each way a later append makes F2's effect moot (the retract was already right).
MOOT = {
    "explicit supersedes": [event(3, type="assert", fact="F3", key="c", value=3, supersedes=["F2"])],
    "a rival in its slot": [event(3, type="assert", fact="F3", key="b", value=3)],
    "a draft in its slot promoted": [
        event(3, type="assert", fact="F3", key="b", value=3, status="draft"),
        event(4, type="promote", fact="F3"),
    ],
    "retracted": [event(3, type="retract", fact="F2")],
}


@pytest.mark.parametrize("name", sorted(MOOT))
def test_a_moot_pending_effect_lets_its_targets_live_again(name: str) -> None:
    tail = MOOT[name]
    pure = gamma.resolve(gamma.parse_events([json.dumps(e) for e in HEAD + tail]), WHO, AT)
    assert "F1" in [record.fact for record in pure.admitted]  # the case is what it says
    engine = gamma.Engine()
    engine.append([json.dumps(e) for e in HEAD])
    before = engine.resolve(WHO, AT)
    assert "F1" not in [record.fact for record in before.admitted]  # F2's effect, due by AT
    engine.append([json.dumps(e) for e in tail])
    assert engine.resolve(WHO, AT).to_json() == pure.to_json()
    assert type(engine.check(WHO, AT, ["F1"])["F1"]).__name__ == "Admitted"
    assert [r.fact for r in engine.resolve(WHO, AT, keys=["a"]).admitted] == ["F1"]
