"""A request body read on the fast path (``gamma.serve.app.strict_or_none``: orjson, then the
checks that find what the strict reader refuses) is the strict reader's value or nothing:
never a body ``decode_json`` would refuse, never another value. Through the app, a body the
fast path passes on is refused as the strict reader refuses it, naming the field. And the
workers ``run`` starts get a health-check limit a worker folding a large store can keep.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

import uvicorn  # noqa: E402
from test_serve_security import Served, serve  # noqa: E402

from gamma.core.reading.strictjson import decode_json  # noqa: E402
from gamma.core.terms.errors import InputError  # noqa: E402
from gamma.serve import app as served_app  # noqa: E402
from gamma.serve.app import strict_or_none  # noqa: E402
from gamma.serve.config import CONFIG_ENV, ServeConfig  # noqa: E402

EVALUATION = '{"subject":{"type":"agent","id":"alice"},"action":{"name":"rely"},' \
             '"resource":{"type":"fact","id":"F1"}}'  # fmt: skip

#: bodies the strict reader refuses that orjson alone accepts (or reads otherwise)
REFUSED = [
    pytest.param('{"a":{"b":1,"b":2}}', id="repeated-key-nested"),
    pytest.param('{"evaluations":[{"resource":{"id":"F1","id":"F2"}}]}', id="repeated-key-in-item"),
    pytest.param('{"a":1,"a":1}', id="repeated-key-same-value"),
    pytest.param('{"a":"k\\":","a":2}', id="repeated-key-after-an-escaped-colon"),
    pytest.param('{"a":1.0}', id="float"),
    pytest.param('{"a":1e5}', id="exponent"),
    pytest.param('{"a":9007199254740992}', id="past-2^53"),
    pytest.param('{"a":-9007199254740992}', id="past-minus-2^53"),
    pytest.param('{"a":18446744073709551615}', id="u64"),
    pytest.param("[" * 33 + "]" * 33, id="33-deep"),
    pytest.param('{"a":' * 33 + "1" + "}" * 33, id="33-deep-objects"),
    pytest.param('{"a":"\\ud800"}', id="lone-surrogate-escape"),
    pytest.param('{"a":NaN}', id="nan"),
    pytest.param("\ufeff{}", id="bom"),
]

#: bodies both read, to the same value
ACCEPTED = [
    EVALUATION,
    '{"a":9007199254740991,"b":-9007199254740991,"c":-0}',
    "[" * 32 + "]" * 32,
    '{"k\\":":1,"x":"a\\"b:","y":{"z":"\\\\"}}',
    '{"a" :1, "b"\n:2}',
    '{"é":"ü","t":true,"f":false,"n":null,"e":"\\u00e9"}',
]


def strict(text: str) -> Any:
    try:
        return ("ok", decode_json(text))
    except InputError as exc:
        return ("refused", type(exc).__name__, exc.field)


@pytest.mark.parametrize("text", REFUSED)
def test_what_the_strict_reader_refuses_is_left_to_it(text: str) -> None:
    assert strict(text)[0] == "refused"
    assert strict_or_none(text) is None


@pytest.mark.parametrize("text", ACCEPTED)
def test_what_both_read_is_the_same_value(text: str) -> None:
    fast = strict_or_none(text)
    assert fast is not None
    assert strict(text) == ("ok", fast)
    assert json.dumps(fast) == json.dumps(decode_json(text))  # the same types and key order


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(_VALUES, st.integers(min_value=0, max_value=3))
def test_the_fast_path_never_reads_what_the_strict_reader_does_not(value: Any, dup: int) -> None:
    """Random documents, some with a key repeated by editing the text: the fast path returns
    the strict reader's value, or nothing."""
    text = json.dumps({"v": value})
    if dup and text.count('":') > 1:
        # repeat the first key later in the same object: {"v": ...} -> {"v": ..., "v": 1}
        text = text[:-1] + ', "v": 1}'
    fast = strict_or_none(text)
    if fast is not None:
        assert strict(text) == ("ok", fast)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("body"))


def _raw(served: Served, path: str, text: str) -> Any:
    return served.client.post(path, content=text.encode("utf-8"), headers={
        "Authorization": f"Bearer {served.tokens['alice-agent']}", "Content-Type": "application/json"})


def test_a_repeated_key_in_a_batch_item_is_refused_naming_it(served: Served) -> None:
    """orjson alone would keep the last ``id``; the server refuses the body (400) as the
    strict reader does, naming the field, and decides nothing."""
    text = ('{"subject":{"type":"agent","id":"alice"},"action":{"name":"rely"},'
            '"evaluations":[{"resource":{"type":"fact","id":"F1","id":"F2"}}]}')  # fmt: skip
    answer = _raw(served, "/access/v1/evaluations", text)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and "duplicate key 'id'" in error["message"]
    assert "evaluations" in error["message"]


@pytest.mark.parametrize("text", ['{"context":{"n":1.5}}', '{"context":{"n":9007199254740993}}'])
def test_a_float_or_unsafe_integer_is_refused(served: Served, text: str) -> None:
    body = json.loads(EVALUATION)
    body.update(json.loads(text))
    raw = json.dumps(body).replace("9.007199254740992e+15", "9007199254740993")
    answer = _raw(served, "/access/v1/evaluation", raw)
    assert answer.status_code == 400, answer.text
    assert "context.n" in answer.json()["error"]["message"]


def test_a_body_read_fast_is_decided_as_the_strict_reader_would(served: Served) -> None:
    """The same evaluation sent compact and spread out (escapes, spaces): the same answer."""
    spread = EVALUATION.replace(":", " : ").replace('"F1"', '"\\u0046\\u0031"')
    answers = [_raw(served, "/access/v1/evaluation", t) for t in (EVALUATION, spread)]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()


def test_workers_get_the_long_health_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """uvicorn kills a worker that leaves its health check unanswered for 5 s by default: a
    worker folding a large store on a busy machine can, and its successor folds again, without
    end. ``run`` hands uvicorn the longer limit (where uvicorn has the setting)."""
    monkeypatch.setenv(CONFIG_ENV, "")  # run() sets it for its workers: put back after
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: seen.update(kwargs))
    served_app.run_server(ServeConfig(store=str(tmp_path / "s.db"), callers=str(tmp_path / "c.toml")), workers=2)
    assert seen["workers"] == 2
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:
        assert seen["timeout_worker_healthcheck"] == served_app.WORKER_HEALTHCHECK >= 60
