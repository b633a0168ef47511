"""The JSON Schemas that ship in the package (gamma/data/schemas, draft 2020-12).

``case`` is a file a user writes: it accepts every case gamma accepts in the corpus,
rejects what gamma rejects on shape, and names the same choices as the code. Every other
schema is one of gamma's JSON outputs: each output, produced from the bundled fixtures by
the command a program would run (its console entry point, in process), validates against its schema (jsonschema's
Draft202012Validator with its format checker), and the schemas are closed, so a field
added or renamed without its schema fails here.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner

import gamma
from gamma.cli import main
from gamma.conformance.cases import load_cases
from gamma.conformance.model import DECIDERS, MODES, SIDES, SUITES
from gamma.conformance.parse import parse_case
from gamma.core.terms.decisions import REASON_CODES
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import KINDS
from gamma.data import SCHEMAS, corpus_dir, schema_file

try:  # the extra gamma[mcp]
    from gamma.integrations.binding import Binding
    from gamma.integrations.mcp import TOOLS, GammaMCP
except ImportError:
    GammaMCP = None

jsonschema = pytest.importorskip("jsonschema")
ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = schema_file("case").parent
EXAMPLES = corpus_dir() / "examples"
ACME, ALICE = EXAMPLES / "acme.jsonl", EXAMPLES / "alice.json"
AT, LATER = "2026-03-02T10:00:00Z", "2026-03-09T10:00:00Z"
#: every JSON output and its schema (the file gamma/data/schemas/<name>.schema.json)
OUTPUTS = ("resolution", "audit-record", "audit-diff", "replay", "explanation", "validation",
           "score", "conformance", "verify", "append", "proof", "checkpoint", "review-line",
           "review-summary", "mcp-results")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text("utf-8"))
    return loaded


@functools.cache
def validator(name: str = "case") -> Any:
    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def errors(name: str, instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in validator(name).iter_errors(instance)]


def gamma_cli(*args: str | Path, ok: tuple[int, ...] = (0,)) -> str:
    """stdout of ``gamma ARGS`` (the console entry point, in process)."""
    with CliRunner().isolation(env={"GAMMA_LOG_LEVEL": "off", "GAMMA_CHAIN_KEY": None}) as (
        out, err, _,
    ):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    structlog.reset_defaults()
    assert code in ok, (args, code, err.getvalue().decode("utf-8")[-3000:])
    return out.getvalue().decode("utf-8")


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- the schema files --------------------------------------------------------------------

def test_every_shipped_schema_is_a_closed_2020_12_schema_with_its_own_id() -> None:
    shipped = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
    assert shipped == sorted({"case", *OUTPUTS})
    assert set(SCHEMAS) <= set(shipped)
    ids = set()
    for name in shipped:
        schema = load(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/schemas/{name}.schema.json")
        ids.add(schema["$id"])
        validator(name)  # check_schema
        for where, node in _objects(schema, name):
            if "properties" in node:  # every object with named fields is closed
                assert node.get("additionalProperties") is False, where
                assert set(node.get("required", ())) <= set(node["properties"]), where
        refs = set(re.findall(r'"\$ref": "([^"]+)"', json.dumps(schema)))
        assert all(r.startswith("#/$defs/") for r in refs), (name, refs)  # self-contained
    assert len(ids) == len(shipped)


def _objects(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from _objects(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{where}/{i}")


def test_the_schemas_name_the_code_s_choices() -> None:
    defs = load("resolution")["$defs"]
    assert defs["reason_code"]["enum"] == list(REASON_CODES)
    assert defs["admitted"]["properties"]["kind"]["enum"] == list(KINDS)


def test_spec_section_5_lists_every_field_of_the_resolution() -> None:
    spec = (ROOT / "SPEC.md").read_text(encoding="utf-8")
    section = spec[spec.index("## 5. Determinism and the output record"):spec.index("## 6. ")]
    listed = re.search(r"^\s+\{(\"[a-z_]+\"(?:, \"[a-z_]+\")*)\}$", section, re.MULTILINE)
    assert listed, "SPEC §5 shows the resolution's fields as {\"actor\", ...}"
    fields = re.findall(r'"([a-z_]+)"', listed.group(1))
    assert sorted(fields) == sorted(load("resolution")["$defs"]["resolution"]["required"])
    for field in fields:
        assert f"`{field}`" in section, field


# -- each output against its schema -------------------------------------------------------

def test_resolution_of_the_example_and_of_every_corpus_case() -> None:
    out = gamma_cli("resolve", ACME, "--actor", ALICE, "--at", AT, "--format", "json")
    assert errors("resolution", json.loads(out)) == []
    for policy in ("recheck", "multivalue", "strict"):
        out = gamma_cli("resolve", ACME, "--actor", ALICE, "--at", LATER, "--format", "json",
                        "--policy", policy)
        assert errors("resolution", json.loads(out)) == []
    seen_codes, seen_ignored = set(), set()
    for case in load_cases([corpus_dir()]):
        record = json.loads(case.resolve().to_json())
        assert errors("resolution", record) == [], case.id
        seen_codes |= {r["code"] for e in record["excluded"] for r in e["reasons"]}
        seen_codes |= {a["stale"]["code"] for a in record["admitted"] if "stale" in a}
        seen_ignored |= {i["code"] for i in record["ignored"]}
    # tenant_isolation is never in a resolution; recomputed only in an admitted item's stale;
    # the corpus holds no erasure (its tables stay those of DESIGN): an erased record is
    # checked against the schema in tests/test_erasure_core.py
    assert seen_codes == set(REASON_CODES) - {"tenant_isolation", "erased"}
    assert "insufficient_authority" in seen_ignored


def test_audit_record_diff_and_replay(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    gamma_cli("resolve", ACME, "--actor", ALICE, "--at", AT, "--audit", a)
    gamma_cli("resolve", ACME, "--actor", ALICE, "--at", LATER, "--audit", b, "--policy", "recheck")
    for record in (a, b):
        assert errors("audit-record", json.loads(record.read_text("utf-8"))) == []
    diff = json.loads(gamma_cli("audit", "diff", "--json", a, b, ok=(1,)))
    assert diff["fields"] and errors("audit-diff", diff) == []
    same = json.loads(gamma_cli("audit", "diff", "--json", a, a))
    assert same["same"] and errors("audit-diff", same) == []
    replay = json.loads(gamma_cli("replay", ACME, "--expect", a, "--json"))
    assert replay["ok"] and errors("replay", replay) == []
    # a record edited after it was written: a replay that differs, field by field
    edited = json.loads(a.read_text("utf-8"))
    edited["admitted"] = edited["admitted"][1:]
    a.write_text(json.dumps(edited), encoding="utf-8")
    replay = json.loads(gamma_cli("replay", ACME, "--expect", a, "--json", ok=(1,)))
    assert not replay["ok"] and errors("replay", replay) == []


def test_explanation_of_every_fact_of_the_example() -> None:
    events = gamma.load_events(ACME)
    facts = sorted({e.fact for e in events if isinstance(e, gamma.Assert)})
    actor = json.loads(ALICE.read_text("utf-8"))
    decisions = set()
    for fact in facts:
        for auditor in (False, True):
            out = gamma.explain(events, fact, actor, AT, auditor=auditor).to_dict()
            assert errors("explanation", out) == [], (fact, auditor)
            decisions.add(out["decision"])
    assert {"admitted", "excluded"} <= decisions
    out = gamma_cli("explain", ACME, "F16", "--actor", ALICE, "--at", AT, "--auditor",
                    "--format", "json")
    assert json.loads(out)["changes"] and errors("explanation", json.loads(out)) == []


def test_validation_and_score() -> None:
    out = gamma_cli("validate", ACME, "--actor", ALICE, "--at", AT, "--question", "severance?",
                    "--response", "It is $40,000.", ok=(1,))
    assert errors("validation", json.loads(out)) == []
    out = gamma_cli("validate", ACME, "--actor", ALICE, "--at", AT, "--question", "discount?",
                    "--response", "15%.")
    assert errors("validation", json.loads(out)) == []
    out = gamma_cli("score", EXAMPLES / "responses.jsonl", "--log", ACME, "--json")
    assert json.loads(out)["findings"] and errors("score", json.loads(out)) == []


def test_conformance_of_a_failing_reader_and_of_the_pair_audit() -> None:
    passed = failed = 0
    for args in (("--reader", "latest-mention"), ("--suite", "counterfactual", "--audit")):
        report = json.loads(gamma_cli("conformance", "--json", *args, ok=(0, 1)))
        assert errors("conformance", report) == [], args
        passed += sum(case["status"] == "pass" for case in report["cases"])
        failed += sum(case["status"] == "fail" for case in report["cases"])
    assert "audit" in report and passed and failed


def test_store_outputs_verify_and_proofs(tmp_path: Path) -> None:
    store = tmp_path / "acme.db"
    assert errors("append", json.loads(gamma_cli("init", store))) == []
    assert errors("append", json.loads(gamma_cli("append", store, ACME))) == []
    assert errors("verify", json.loads(gamma_cli("verify", store, "--json"))) == []
    exported = tmp_path / "acme.export.jsonl"
    exported.write_text(gamma_cli("export", store), encoding="utf-8")
    lines = exported.read_text("utf-8").splitlines()
    lines[3] = lines[3].replace('"crm"', '"crn"', 1)  # an edited event: a problem found
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = json.loads(gamma_cli("verify", tampered, "--json", "--expect-head", "0" * 64,
                                  ok=(1,)))
    assert not report["ok"] and errors("verify", report) == []
    for args in (("inclusion", store, "--event", "e07"), ("consistency", store, "--from", "20")):
        assert errors("proof", json.loads(gamma_cli("prove", *args))) == []
    gamma_cli("keygen", "--name", "audit.example/acme", "--out", tmp_path / "k")
    checkpoint = tmp_path / "cp.txt"
    checkpoint.write_text(gamma_cli("checkpoint", store, "--key-file", tmp_path / "k.key"),
                          encoding="utf-8")
    out = gamma_cli("verify-checkpoint", checkpoint, "--pub-key", tmp_path / "k.pub")
    assert errors("checkpoint", json.loads(out)) == []


def test_review_lines_and_summary(tmp_path: Path) -> None:
    actors = tmp_path / "actors.jsonl"
    actors.write_text(ALICE.read_text("utf-8").strip() + "\n" + json.dumps(
        {"id": "hana", "tenant": "acme", "roles": ["hr"], "clearance": "confidential"}) + "\n",
        encoding="utf-8")
    for out, since in ((tmp_path / "plain", ()), (tmp_path / "since", ("--since", AT))):
        gamma_cli("-q", "review", ACME, "--actors", actors, "--at", LATER, "--out", out, *since)
        lines = json_lines((out / "tenants" / "acme.jsonl").read_text("utf-8"))
        assert len(lines) == 2 and all(("since" in line) == bool(since) for line in lines)
        for line in lines:
            assert errors("review-line", line) == []
        summary = json.loads((out / "summary.json").read_text("utf-8"))
        assert errors("review-summary", summary) == []


def test_mcp_tool_results(tmp_path: Path) -> None:
    if GammaMCP is None:
        pytest.skip("the extra gamma[mcp] is not installed")
    store = tmp_path / "memory.db"
    gamma_cli("init", store)
    gamma_cli("append", store, ACME)
    defs = load("mcp-results")["$defs"]
    with gamma.Engine.open(store) as engine:
        server = GammaMCP(Binding(engine, json.loads(ALICE.read_text("utf-8")),
                                  clock=lambda: gamma.core.terms.canonical.parse_at(LATER)))
        calls = [("recall", {}), ("recall", {"keys": ["discount", "nothing"]}),
                 ("remember", {"key": "tone", "value": "brief", "scope": "helios"}),
                 ("forget", {"fact": "F3", "reason": "stale"}),
                 ("forget", {"fact": "F4", "reason": "not mine"})]  # an executive's: no effect
        assert {name for name, _ in calls} == set(TOOLS)
        for name, arguments in calls:
            result = server.call(name, arguments)
            assert not result.is_error, (name, result)
            content = result.structured_content
            assert errors("mcp-results", content) == [], name
            tool = jsonschema.Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{name}"})
            assert not list(tool.iter_errors(content)), name
    # one definition per tool, and the output schemas the server announces name its fields
    assert {part["$ref"].removeprefix("#/$defs/") for part in load("mcp-results")["anyOf"]} \
        == set(TOOLS)
    for name, (_, _, announced) in TOOLS.items():
        assert set(announced["properties"]) == set(defs[name]["properties"]), name
        assert set(announced["required"]) == set(defs[name]["required"]), name


# -- the schemas reject what is not gamma's output ------------------------------------------

@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(version="1"),  # a field the format does not have
        lambda r: r.pop("tree"),  # a field it always has
        lambda r: r["admitted"][0].update(value=1.5),  # a float value
        lambda r: r["excluded"][0]["reasons"][0].update(code="gone"),  # not a reason code
        lambda r: r["excluded"][0].update(value="$40,000"),  # never a value of an excluded fact
        lambda r: r.update(at="2 March"),  # not a time
        lambda r: r["tree"].update(root="ABC"),  # not a hash
    ],
)
def test_the_resolution_schema_rejects(change: Any) -> None:
    record = json.loads(gamma_cli("resolve", ACME, "--actor", ALICE, "--at", AT, "--format",
                                  "json"))
    change(record)
    assert errors("resolution", record)


# -- the case file (a schema for input) -----------------------------------------------------

def corpus() -> list[Path]:
    return sorted(p for p in corpus_dir().glob("*/*.json")
                  if "suite" in json.loads(p.read_text(encoding="utf-8")))


def test_every_bundled_case_is_valid() -> None:
    check = validator()
    paths = corpus()
    assert len(paths) == 230
    for path in paths:
        found = [e.message for e in check.iter_errors(json.loads(path.read_text()))]
        assert not found, (path, found)


def test_choices_are_the_code_s() -> None:
    props = json.loads(schema_file("case").read_text())["properties"]
    assert props["suite"]["enum"] == list(SUITES)
    assert props["side"]["enum"] == list(SIDES) and props["mode"]["enum"] == list(MODES)
    assert props["decidable_by"]["enum"] == list(DECIDERS)
    excluded = props["expect"]["properties"]["excluded"]["additionalProperties"]["items"]
    assert excluded["enum"] == list(REASON_CODES)
    assert "case" in SCHEMAS


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(colour="red"),  # unknown field
        lambda c: c.pop("expect"),  # required field
        lambda c: c.update(suite="nightly"),  # not a suite
        lambda c: c["expect"].update(excluded={"F1": ["gone"]}),  # not a reason code
        lambda c: c.update(at="yesterday"),  # not RFC 3339
    ],
)
def test_both_reject(change: Any) -> None:
    """A shape gamma refuses, the schema refuses too."""
    path = corpus()[0]
    case = json.loads(path.read_text())
    change(case)
    assert list(validator().iter_errors(case))
    with pytest.raises(InputError):
        parse_case(case, path=path)


def test_a_resolution_with_an_erased_fact_is_of_the_schema() -> None:
    """The corpus holds no erasure: an erased fact's record (code ``erased``, SPEC §21) and its
    dependent's are checked here."""
    salt = "ab" * 32
    lines = [
        {"type": "assert", "id": "e1", "ts": "2026-01-01T00:00:00Z", "actor": "w",
         "tenant": "acme", "fact": "F1", "key": "salary", "value": 5100, "salt": salt},
        {"type": "assert", "id": "e2", "ts": "2026-01-01T00:00:01Z", "actor": "w",
         "tenant": "acme", "fact": "F2", "key": "bonus", "value": 510, "depends_on": ["F1"]},
    ]
    parsed = gamma.parse_events([json.dumps(line) for line in lines])
    erase = {"type": "erase", "id": "e3", "ts": "2026-01-02T00:00:00Z", "actor": "w",
             "tenant": "acme", "basis": "GDPR Art. 17(1)(a)",
             "erased": [{"fact": "F1", "commitment": parsed[0].commitment}]}
    log = gamma.parse_events([json.dumps(line) for line in [*lines, erase]])
    who = {"id": "alice", "tenant": "acme"}
    record = json.loads(gamma.resolve(log, who, "2026-01-01T12:00:00Z").to_json())
    assert errors("resolution", record) == []
    codes = {item["fact"]: [r["code"] for r in item["reasons"]] for item in record["excluded"]}
    assert codes == {"F1": ["erased"], "F2": ["dependency_invalidated"]}
