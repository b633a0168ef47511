"""``gamma conformance`` end to end: output, JSON, JUnit XML, external systems, exit statuses."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

import gamma.core.resolving.resolver as resolver_module
from gamma.cli import main
from gamma.core.terms.model import Retract

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
EXAMPLE = ROOT / "examples" / "memory_system.py"
PAIR = ("cf-supersession-sales-positive.json", "cf-supersession-sales-counterfactual.json")


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root, where the default PATH ``fixtures/`` lives."""
    monkeypatch.chdir(ROOT)


def gamma(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def small(tmp_path: Path) -> Path:
    """A small corpus: one pair, one factorial case, one trap."""
    folder = tmp_path / "cases"
    folder.mkdir()
    for name in PAIR:
        shutil.copy(FIXTURES / "counterfactual" / name, folder)
    shutil.copy(FIXTURES / "factorial/fx-draft-adaptable-sales.json", folder)
    shutil.copy(FIXTURES / "trap/trap-anti-trap-finance-hypothetical.json", folder)
    return folder


class TestDefaultRun:
    def test_reference_passes_the_corpus(self, capsys: pytest.CaptureFixture[str], in_root: None,
                                         tmp_path: Path) -> None:  # fmt: skip
        """No PATH: fixtures/ through Γ, every case PASS, the metrics, OK; a JUnit file."""
        junit = tmp_path / "report.xml"
        code, out, err = gamma(capsys, "-v", "conformance", "--junit", junit)
        assert code == 0, out[-2000:]
        assert out.startswith("gamma conformance: the reference resolver, ")
        assert "\nFAIL" not in out and out.rstrip().endswith("OK")
        for heading in ("SUMMARY", "GBR", "URR", "PAIRS", "FACTORIAL", "always-refuse baseline",
                        "POOL", "TRAPS"):
            assert heading in out
        log = json.loads(err.strip().splitlines()[-1])
        assert log["command"] == "conformance" and log["failed"] == 0 and log["ok"] is True
        root = ET.parse(junit).getroot()
        assert int(root.get("tests", "")) == log["cases"] and root.get("failures") == "0"
        assert {s.get("name") for s in root.findall("testsuite")} == {
            "adversarial", "counterfactual", "factorial", "trap"}

    def test_broken_resolver_fails_loudly(self, capsys: pytest.CaptureFixture[str], in_root: None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
        """With retracts made ineffective, the command prints FAIL lines and exits 1."""
        monkeypatch.setitem(resolver_module._HANDLERS, Retract, lambda fold, pos, event: None)
        code, out, _ = gamma(capsys, "conformance", "--suite", "adversarial")
        assert code == 1
        assert "\nFAIL  adversarial" in out and "retracted" in out
        assert out.rstrip().endswith("FAILED")


class TestOptions:
    def test_json_has_sorted_keys(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--json")
        assert code == 0
        data = json.loads(out)
        assert out.strip() == json.dumps(data, sort_keys=True, separators=(",", ":"),
                                         ensure_ascii=False)
        assert data["ok"] is True and data["summary"]["cases"] == 4
        assert set(data["metrics"]) >= {"gbr", "urr", "pairs", "factorial", "pool", "traps"}
        assert data["cases"][0]["status"] == "pass" and "audit" not in data

    def test_suite_filter(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--suite", "factorial", "--json")
        assert code == 0 and [c["suite"] for c in json.loads(out)["cases"]] == ["factorial"]

    def test_reader_fails_its_cases(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A lazy reader fails the cases it cannot answer: exit 1, each FAIL with its grade."""
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--reader", "latest-mention")
        assert code == 1
        assert out.startswith("gamma conformance: the reader latest-mention, 4 cases")
        assert "FAIL  counterfactual cf-supersession-sales-positive" in out
        assert "grades drift" in out and out.rstrip().endswith("FAILED")

    def test_recompute_case_and_quote_stated(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The paper's snacks case under ``recompute``: Γ answers 14 and passes (exit 0);
        ``--reader quote-stated`` quotes the stated 20, a drift and a leak (exit 1)."""
        snacks = FIXTURES / "trap" / "trap-sequence-shopping-recompute.json"
        code, out, _ = gamma(capsys, "conformance", snacks, "--json")
        (result,) = json.loads(out)["cases"]
        assert code == 0 and (result["answer"], result["status"]) == ("14", "pass")
        code, out, _ = gamma(capsys, "conformance", snacks, "--reader", "quote-stated")
        assert code == 1
        assert 'answer "20" grades drift, expected gold ["14"]' in out
        assert "GBR                  1/1 = 100.0%" in out

    def test_junit_with_failures(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        junit = tmp_path / "out.xml"
        code, _, _ = gamma(capsys, "conformance", small(tmp_path), "--reader", "always-refuse",
                           "--junit", junit)
        assert code == 1
        root = ET.parse(junit).getroot()
        failures = root.findall(".//testcase/failure")
        assert int(root.get("failures", "")) == len(failures) > 0
        assert int(root.get("tests", "")) == 4

    def test_audit(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """--audit prints each pair's similarity; a pair whose wording differs fails the run."""
        folder = small(tmp_path)
        code, out, _ = gamma(capsys, "conformance", folder, "--audit")
        assert code == 0 and "AUDIT  1 pairs: 1 admissible, 0 rejected" in out
        path = folder / PAIR[1]
        obj = json.loads(path.read_text())
        obj["question"] = obj["question"].replace("price cap", "price ceiling")
        path.write_text(json.dumps(obj))
        code, out, _ = gamma(capsys, "conformance", folder, "--audit", "--json")
        data = json.loads(out)
        assert code == 1 and data["ok"] is False and data["audit"]["rejected"] == 1
        assert data["summary"]["failed"] == 0  # every case still passes: the pair is the problem


class TestExternal:
    def test_example_system_passes(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """The governed example (gamma behind the protocol) passes the cases."""
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--system",
                             f"{sys.executable} {EXAMPLE}")
        assert code == 0, out
        assert "the system " in out and out.rstrip().endswith("OK")

    def test_naive_example_fails(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """The naive example memory leaks and drifts: exit 1, with findings in the JSON."""
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--json", "--system",
                             f"{sys.executable} {EXAMPLE} --naive")
        data = json.loads(out)
        assert code == 1 and data["system"]["kind"] == "external"
        assert data["metrics"]["gbr"]["k"] > 0
        assert any(f["kind"] == "bypass" for c in data["cases"] for f in c["findings"])

    def test_crashing_system_is_exit_1(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A system that dies on every case: each case an ERROR, exit 1, not a traceback."""
        crash = tmp_path / "crash.py"
        crash.write_text("import sys\nsys.stdin.readline()\nsys.exit(7)\n")
        junit = tmp_path / "out.xml"
        code, out, _ = gamma(capsys, "conformance", small(tmp_path), "--system",
                             f"{sys.executable} {crash}", "--junit", junit)
        assert code == 1 and out.count("ERROR ") == 4 and "exited with status 7" in out
        assert ET.parse(junit).getroot().get("errors") == "4"


class TestInputErrors:
    @pytest.mark.parametrize(
        "args",
        [
            ["--reader", "clairvoyant"],
            ["--reader", "reference", "--system", "true"],
            ["--timeout", "0"],
            ["--suite", "bogus"],
        ],
    )
    def test_usage(self, capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]) -> None:
        code, _, _ = gamma(capsys, "conformance", small(tmp_path), *args)
        assert code == 2

    def test_missing_path(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, _, err = gamma(capsys, "conformance", tmp_path / "nowhere")
        assert code == 2 and "no such file" in err

    def test_no_cases(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, _, err = gamma(capsys, "conformance", tmp_path)
        assert code == 2 and "no conformance cases found" in err
        code, _, err = gamma(capsys, "conformance", small(tmp_path), "--suite", "imported")
        assert code == 2 and "suite 'imported'" in err

    def test_bad_case(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        bad = tmp_path / "bad.json"
        bad.write_text('{"id": "x", "suite": "trap"')
        code, _, err = gamma(capsys, "conformance", bad)
        assert code == 2 and "bad.json" in err

    def test_system_that_cannot_start(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, _, err = gamma(capsys, "conformance", small(tmp_path), "--system", tmp_path / "nope")
        assert code == 2 and "cannot start" in err

    def test_unwritable_junit(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        code, _, err = gamma(capsys, "conformance", small(tmp_path), "--junit",
                             tmp_path / "no" / "dir" / "x.xml")
        assert code == 2 and err == f"Error: --junit: no such folder {str(tmp_path / 'no' / 'dir')!r}\n"
        assert not (tmp_path / "no").exists()


class TestJUnit:
    """The JUnit report: valid against the Jenkins junit-10 XSD (tests/junit-10.xsd), with a
    time per case and suite, the failed expectation as the message, stderr with its lines."""

    @staticmethod
    def schema() -> object:
        xmlschema = pytest.importorskip("xmlschema")
        return xmlschema.XMLSchema(str(Path(__file__).parent / "junit-10.xsd"))

    def test_failures_validate(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        junit = tmp_path / "out.xml"
        code, _, _ = gamma(capsys, "conformance", small(tmp_path), "--reader", "latest-mention",
                           "--junit", junit)
        assert code == 1
        self.schema().validate(str(junit))  # type: ignore[attr-defined]
        root = ET.parse(junit).getroot()
        cases = root.findall(".//testcase")
        assert cases and all(float(c.get("time", "-1")) >= 0 for c in cases)
        suites = root.findall("testsuite")
        assert all(s.get("time") for s in suites) and root.get("time")
        failure = root.find(".//testcase/failure")
        assert failure is not None and "expected gold" in failure.get("message", "")
        assert failure.text is not None and "case: " in failure.text

    def test_system_err_keeps_lines(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A crashing system's stderr: real line breaks, its end kept (the last 64 KiB)."""
        crash = tmp_path / "crash.py"
        crash.write_text(
            "import sys\nsys.stdin.readline()\n"
            "sys.stderr.write('x' * 70000 + '\\nTraceback (most recent call last):\\n"
            "  boom\\nValueError: bad\\n')\nsys.exit(7)\n"
        )
        junit = tmp_path / "out.xml"
        code, _, _ = gamma(capsys, "conformance", small(tmp_path), "--system",
                           f"{sys.executable} {crash}", "--junit", junit)
        assert code == 1
        self.schema().validate(str(junit))  # type: ignore[attr-defined]
        errs = [e.text or "" for e in ET.parse(junit).getroot().iter("system-err")]
        assert len(errs) == 4
        assert all(e.endswith("Traceback (most recent call last):\n  boom\nValueError: bad\n")
                   for e in errs)
        assert all(len(e.encode()) <= 64 * 1024 and "\\n" not in e for e in errs)
