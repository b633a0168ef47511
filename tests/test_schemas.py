"""The case-file JSON Schema that ships in the package accepts every case gamma accepts in
the corpus, rejects what gamma rejects on shape, and names the same choices as the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gamma.conformance.model import DECIDERS, MODES, SIDES, SUITES
from gamma.conformance.parse import parse_case
from gamma.core.decisions import REASON_CODES
from gamma.core.errors import InputError
from gamma.data import SCHEMAS, corpus_dir, schema_file

jsonschema = pytest.importorskip("jsonschema")
ROOT = Path(__file__).resolve().parent.parent


def validator() -> Any:
    schema = json.loads(schema_file("case").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def corpus() -> list[Path]:
    return sorted(p for p in corpus_dir().glob("*/*.json")
                  if "suite" in json.loads(p.read_text(encoding="utf-8")))


def test_every_bundled_case_is_valid() -> None:
    check = validator()
    paths = corpus()
    assert len(paths) == 216
    for path in paths:
        errors = [e.message for e in check.iter_errors(json.loads(path.read_text()))]
        assert not errors, (path, errors)


def test_choices_are_the_code_s() -> None:
    props = json.loads(schema_file("case").read_text())["properties"]
    assert props["suite"]["enum"] == list(SUITES)
    assert props["side"]["enum"] == list(SIDES) and props["mode"]["enum"] == list(MODES)
    assert props["decidable_by"]["enum"] == list(DECIDERS)
    excluded = props["expect"]["properties"]["excluded"]["additionalProperties"]["items"]
    assert excluded["enum"] == list(REASON_CODES)
    assert SCHEMAS == ("case",)


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
