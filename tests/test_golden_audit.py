"""Every golden audit record in audit/ replays identically from its fixture.

The records are produced by ``python audit/regenerate.py``; a change of
semantics shows here as a failing replay and, after regenerating, as a
reviewed diff of audit/.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gamma.audit.replay import read_audit, replay
from gamma.cli import main
from gamma.core.terms.canonical import canonical_json

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "audit" / "regenerate.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_regenerate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # attrs resolves the module's annotations through it
    spec.loader.exec_module(module)
    return module


regenerate = _load()
REQUESTS = regenerate.discover(ROOT).requests


@pytest.mark.parametrize("request_", REQUESTS, ids=[r.record.as_posix() for r in REQUESTS])
def test_golden_record_replays(request_: object) -> None:
    """The golden record is canonical and replays identically from its fixture."""
    path = ROOT / request_.record  # type: ignore[attr-defined]
    assert path.is_file(), f"{path} is missing: run python audit/regenerate.py"
    record = read_audit(path)
    assert path.read_text(encoding="utf-8") == canonical_json(record) + "\n"
    given = regenerate.inputs(request_)
    result = replay(given.events, record, policy=given.policy, source=str(path))
    assert result.ok, result.render()


@pytest.mark.parametrize(
    "request_",
    [r for r in REQUESTS if r.log is not None and r.policy is None],
    ids=lambda r: r.record.as_posix(),
)
def test_golden_record_replays_through_the_cli(
    request_: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gamma replay LOG --expect RECORD`` exits 0 for the records of log files."""
    with pytest.raises(SystemExit) as exc:
        record = ROOT / request_.record  # type: ignore[attr-defined]
        main(["replay", str(request_.log), "--expect", str(record)])  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert exc.value.code == 0, out


def test_acme_record_is_present() -> None:
    """The example log has its golden record under the documented name."""
    assert Path("audit/examples/acme.alice.json") in [r.record for r in REQUESTS]


def test_regenerate_check_passes() -> None:
    """``python audit/regenerate.py --check`` finds nothing to change and no uncovered log."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- the generator itself, on a small tree of its own -----------------------------------------

EVENT = {"id": "e1", "type": "assert", "ts": "2026-03-01T09:00:00Z", "actor": "w",
         "tenant": "acme", "fact": "F1", "key": "k", "value": "v"}  # fmt: skip
ACTOR = {"id": "alice", "tenant": "acme"}
AT = "2026-03-02T00:00:00Z"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """fixtures/ with a log, an actor, a case file, a suite, a response file and two broken
    fixtures (a log and a case)."""
    fixtures = tmp_path / "fixtures" / "d"
    fixtures.mkdir(parents=True)
    (tmp_path / "audit").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "multi.toml").write_text("[supersession]\nsame_key = false\n")
    (fixtures / "log.jsonl").write_text(json.dumps(EVENT) + "\n")
    (fixtures / "bob.json").write_text(json.dumps({"id": "bob", "tenant": "acme"}))
    case = {"id": "c1", "suite": "imported", "events": [EVENT], "actor": ACTOR, "at": AT,
            "policy": "multi", "expect": {"admitted": ["F1"]}}  # fmt: skip
    (fixtures / "case.json").write_text(json.dumps(case, indent=2))
    early = "2026-03-01T08:00:00Z"
    suite = [
        {"id": "s/1", "suite": "imported", "log": "log.jsonl", "actor": ACTOR, "at": AT,
         "expect": {}},
        {"id": "s2", "suite": "imported", "events": [EVENT], "actor": ACTOR, "at": early,
         "expect": {}},
    ]  # fmt: skip
    (fixtures / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in suite))
    (fixtures / "responses.jsonl").write_text(json.dumps({"case": "c", "response": "r"}) + "\n")
    (fixtures / "broken.jsonl").write_text('{"id": "x", "type": "assert"}\n')
    (fixtures / "bad-case.json").write_text('{"id": "b", "suite": "imported"}')
    (tmp_path / "audit" / "requests.toml").write_text(
        '[[request]]\nlog = "fixtures/d/log.jsonl"\nactor = "fixtures/d/bob.json"\n'
        f'at = "{AT}"\n'
    )
    return tmp_path


class TestRegenerate:
    def test_discovers_and_names_records(self, tree: Path) -> None:
        """Manifest logs, case files and suite lines map to mirrored record paths."""
        found = regenerate.discover(tree)
        assert [r.record.as_posix() for r in found.requests] == [
            "audit/d/case.json",
            "audit/d/log.bob.json",
            "audit/d/suite/s2.json",
            "audit/d/suite/s_1.json",
        ]
        assert found.uncovered == ()
        skipped = [s.split(":")[0] for s in found.skipped]
        assert skipped == ["fixtures/d/bad-case.json", "fixtures/d/broken.jsonl"]

    def test_write_then_check(self, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Regenerating writes replayable records; --check then passes; an edit makes it fail."""
        assert regenerate.main(["--root", str(tree), "--check"]) == 1
        assert regenerate.main(["--root", str(tree)]) == 0
        assert regenerate.main(["--root", str(tree), "--check"]) == 0
        case = read_audit(tree / "audit/d/case.json")
        assert case["policy"] != read_audit(tree / "audit/d/suite/s_1.json")["policy"]
        assert read_audit(tree / "audit/d/suite/s2.json")["events"] == 0
        record = tree / "audit/d/log.bob.json"
        record.write_text(record.read_text().replace('"admitted":[{', '"admitted":[], "x":[{', 1))
        capsys.readouterr()
        assert regenerate.main(["--root", str(tree), "--check"]) == 1
        assert "audit/d/log.bob.json: malformed" in capsys.readouterr().err

    def test_semantic_drift_is_explained(
        self, tree: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A golden record that no longer matches is reported with a field-level diff."""
        regenerate.main(["--root", str(tree)])
        record = tree / "audit/d/log.bob.json"
        data = json.loads(record.read_text())
        draft = {"code": "draft", "events": ["e1"], "facts": []}
        data["excluded"], data["admitted"] = [{"fact": "F1", "key": "k", "reasons": [draft]}], []
        record.write_text(canonical_json(data) + "\n")
        capsys.readouterr()
        assert regenerate.main(["--root", str(tree), "--check"]) == 1
        err = capsys.readouterr().err
        assert "admitted in now, not in golden:\n      F1 k (golden: excluded: draft)" in err

    def test_engine_only_passes_check(self, tree: Path) -> None:
        """A record written by another gamma version, otherwise identical, passes --check."""
        regenerate.main(["--root", str(tree)])
        record = tree / "audit/d/case.json"
        data = json.loads(record.read_text())
        record.write_text(canonical_json({**data, "engine": "0.0.1"}) + "\n")
        assert regenerate.main(["--root", str(tree), "--check"]) == 0

    def test_stale_and_uncovered(self, tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A record no fixture produces is stale; a log nothing covers is named."""
        regenerate.main(["--root", str(tree)])
        (tree / "audit/d/old.json").write_text("{}")
        (tree / "fixtures/d/new.jsonl").write_text(json.dumps(EVENT) + "\n")
        capsys.readouterr()
        assert regenerate.main(["--root", str(tree), "--check"]) == 1
        err = capsys.readouterr().err
        assert "audit/d/old.json: stale" in err
        assert "fixtures/d/new.jsonl: no golden record" in err
        regenerate.main(["--root", str(tree)])
        assert not (tree / "audit/d/old.json").exists()

    def test_collision_and_bad_manifest_exit_2(self, tree: Path) -> None:
        """Two sources mapping to one record, or a broken manifest, exit 2."""
        manifest = tree / "audit" / "requests.toml"
        manifest.write_text(manifest.read_text() * 2)
        assert regenerate.main(["--root", str(tree)]) == 2
        manifest.write_text('[[request]]\nlog = "fixtures/d/log.jsonl"\n')
        assert regenerate.main(["--root", str(tree)]) == 2
