"""SPEC §18: hostile input gets an input error naming line and field, never a traceback, and
reading it holds no more than one line past the limit (issue 26, part 5).

The tests catch ``InputError`` and check ``line``, ``field`` and the words of the message
rather than the class alone, so that each also fails on a reader without the limits (a
``RecursionError``, an accepted line, a reader that swallows an endless stream).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import AT, A, run

from gamma import (
    InputError,
    Policy,
    PolicyError,
    load_events,
    load_policy,
    parse_events,
    parse_policy,
)
from gamma.core.reading.events import batch_objects, event_from_json, read_bounded
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.limits import (
    MAX_CONTEXT_BYTES,
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_POLICY_BYTES,
    MAX_STRING_BYTES,
)
from gamma.core.terms.policy import MAX_CLOCK_SKEW, MAX_LEVELS, MAX_NAME_BYTES, MAX_WRITERS
from gamma.storage._keys import MAX_KEY_FILE_BYTES, read_key_file

GOOD = json.dumps(
    {"type": "assert", "id": "e1", "ts": "2026-03-01T09:00:00Z", "actor": "a", "tenant": "acme",
     "fact": "F1", "key": "k", "value": 1}, separators=(",", ":"),
)  # fmt: skip
ENVELOPE = '"id":"e2","ts":"2026-03-01T09:01:00Z","actor":"a","tenant":"acme"'


def assert_line(body: str) -> str:
    """An assert line (event e2, fact F2) with ``body`` as its last fields."""
    return f'{{"type":"assert",{ENVELOPE},"fact":"F2","key":"k",{body}}}'


def nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"x":' * depth + "1" + "}" * depth


def refused(lines: list[str]) -> InputError:
    with pytest.raises(InputError) as info:
        parse_events(lines)
    return info.value


# -- nesting -----------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize(
    ("where", "field"),
    [
        ('"value":{}', "value"),
        ('"value":1,"visibility":{{"roles":{}}}', "visibility.roles"),
        ('"value":1,"depends_on":{}', "depends_on"),
        ('"value":1,"unknown":{}', "unknown"),
    ],
)
def test_deep_nesting_is_an_input_error_naming_line_and_field(depth: int, where: str, field: str) -> None:
    for kind in ("list", "object"):
        error = refused([GOOD, assert_line(where.format(nested(depth, kind)))])
        # an object's keys are on the path too, up to the container past the limit
        inner = "" if kind == "list" else ".x" * (MAX_DEPTH - 1 - field.count("."))
        assert (error.line, error.field) == (2, field + inner)
        assert f"nested more than {MAX_DEPTH} deep" in error.message


def test_nesting_at_the_limit_is_judged_by_the_other_rules() -> None:
    """An event at depth 1 and a value at 31 more is 32 containers: not a nesting error (the
    value is refused for its type); one more is."""
    error = refused([assert_line(f'"value":{nested(MAX_DEPTH - 1, "list")}')])
    assert "nested" not in error.message and error.field == "value"
    error = refused([assert_line(f'"value":{nested(MAX_DEPTH, "list")}')])
    assert "nested" in error.message and error.field == "value"


def test_brackets_inside_strings_do_not_count() -> None:
    value = "[" * 5_000 + '\\"{' * 100
    events = parse_events([GOOD, assert_line(f'"value":"{value}"')])
    assert events[1].value == "[" * 5_000 + '"{' * 100


def test_the_strict_decoder_refuses_depth_for_every_document() -> None:
    """An actor or a proof read by ``decode_json`` is held to the same depth."""
    with pytest.raises(InputError) as info:
        decode_json('{"roles":' + nested(100_000, "list") + "}", source="actor.json")
    assert (info.value.source, info.value.field) == ("actor.json", "roles")


def test_a_deep_object_handed_in_from_python_is_an_input_error() -> None:
    obj: Any = 1
    for _ in range(200):
        obj = [obj]
    event = json.loads(GOOD) | {"value": obj}
    with pytest.raises(InputError) as info:
        parse_events([json.dumps(event)])
    assert info.value.field == "value"
    with pytest.raises(InputError) as info:
        list(batch_objects([event], source="<batch>"))
    assert (info.value.line, info.value.field) == (1, "value")


# -- line length -------------------------------------------------------------------------


class _Endless:
    """A binary stream of zeros without end that counts what was taken from it."""

    def __init__(self) -> None:
        self.taken = 0

    def read(self, size: int = -1) -> bytes:
        assert size > 0, "an endless stream read whole never returns"
        self.taken += size
        return bytes(size)


def test_an_endless_line_fails_after_the_limit_plus_one_byte() -> None:
    stream = _Endless()
    with pytest.raises(InputError) as info:
        read_bounded(stream, source="<zero>")  # type: ignore[arg-type]
    assert info.value.line == 1 and str(MAX_LINE_BYTES) in info.value.message
    assert stream.taken == MAX_LINE_BYTES + 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_an_endless_pipe_is_refused_with_bounded_reading(tmp_path: Path) -> None:
    """A writer that would send 64 MiB of zeros into a FIFO: the reader stops at the first
    line's limit, having taken little more than it (the writer then meets a closed pipe)."""
    fifo = tmp_path / "zero"
    os.mkfifo(fifo)
    sent = [0]

    def write() -> None:
        with open(fifo, "wb") as pipe:
            block = bytes(1 << 16)
            try:
                while sent[0] < 64 << 20:
                    pipe.write(block)
                    sent[0] += len(block)
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with pytest.raises(InputError) as info:
        load_events(fifo)
    writer.join(timeout=10)
    assert info.value.line == 1 and "line of more than" in info.value.message
    assert sent[0] <= 4 * MAX_LINE_BYTES  # what the reader held, plus the pipe's buffers


def test_a_line_over_the_limit_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(f"{GOOD}\n".encode() + b" " * MAX_LINE_BYTES + b"\n")
    assert len(load_events(path)) == 1  # a blank line at the limit is a blank line
    path.write_bytes(f"{GOOD}\n".encode() + b" " * (MAX_LINE_BYTES + 1) + b"\n")
    with pytest.raises(InputError) as info:
        load_events(path)
    assert info.value.line == 2 and "line of more than" in info.value.message
    with pytest.raises(InputError) as info:
        parse_events([GOOD, " " * (MAX_LINE_BYTES + 1)])
    assert info.value.line == 2 and "line of more than" in info.value.message


def test_a_file_of_random_bytes_fails_at_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(f"{GOOD}\n".encode() + b"\xff\n" + b"x" * 10)
    with pytest.raises(InputError) as info:
        load_events(path)
    assert info.value.line == 2 and "not UTF-8" in info.value.message


# -- string size -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('"value":"{}"', "value"),
        ('"value":1,"visibility":{{"roles":["{}"]}}', "visibility.roles[0]"),
        ('"value":1,"scope":"{}"', "scope"),
    ],
)
def test_a_string_past_the_limit_names_its_field(body: str, field: str) -> None:
    at_limit = assert_line(body.format("v" * MAX_STRING_BYTES))
    over = assert_line(body.format("v" * (MAX_STRING_BYTES + 1)))
    assert len(parse_events([at_limit])) == 1
    error = refused([GOOD, over])
    assert (error.line, error.field) == (2, field) and str(MAX_STRING_BYTES) in error.message


def test_the_string_limit_counts_utf8_bytes_on_every_way_in() -> None:
    """21,846 euro signs are 65,538 bytes: refused though fewer characters than the limit,
    whether written raw (the fast path) or escaped (the strict path)."""
    euros = "\u20ac" * (MAX_STRING_BYTES // 3 + 1)
    for text in (json.dumps(euros, ensure_ascii=False), json.dumps(euros)):
        error = refused([assert_line(f'"value":{text}')])
        assert error.field == "value" and "bytes" in error.message


def test_experience_content_and_retract_reason_are_held_to_the_limit() -> None:
    big = "c" * (MAX_STRING_BYTES + 1)
    experience = f'{{"type":"experience",{ENVELOPE},"experience":"X1","content":"{big}"}}'
    assert refused([experience]).field == "content"
    retract = f'{{"type":"retract",{ENVELOPE},"fact":"F1","reason":"{big}"}}'
    assert refused([GOOD, retract]).field == "reason"


def test_an_appended_event_is_held_to_the_string_limit() -> None:
    """The store's way in (``event_from_json`` of a decoded object) refuses it too."""
    obj = json.loads(GOOD) | {"value": "v" * (MAX_STRING_BYTES + 1)}
    with pytest.raises(InputError) as info:
        event_from_json(obj, line=7)
    assert (info.value.line, info.value.field) == (7, "value")


# -- context size ------------------------------------------------------------------------


def test_a_context_past_the_limit_is_refused_not_cut() -> None:
    count = MAX_CONTEXT_BYTES // MAX_STRING_BYTES + 1
    resolution = run(*(A(f"F{i}", f"k{i}", "v" * MAX_STRING_BYTES) for i in range(count)))
    assert len(resolution.admitted) == count
    with pytest.raises(InputError) as info:
        resolution.render("context")
    assert info.value.field == "context" and "refused, never cut" in info.value.message
    narrowed = resolution.render("context", keys=["k0", "k1"])
    assert narrowed.count("\n- [") == 2


def test_a_context_within_the_limit_is_whole() -> None:
    resolution = run(A("F1", "k", "v" * MAX_STRING_BYTES), at=AT)
    assert "v" * MAX_STRING_BYTES in resolution.render("context")


# -- the policy --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 100_000 + "]" * 100_000,
        "a = " + "{b = " * 100_000 + "1" + "}" * 100_000,
        "[authority]\nladder = " + "[" * 100_000 + "]" * 100_000,
        "[" + "a." * 100_000 + "b]\nc = 1",
        "[authority]\n" + "ladder." * 50_000 + "x = 1",
        "[store]\nclock_skew_seconds = " + "9" * 5_000,
    ],
)
def test_a_hostile_policy_is_a_policy_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.source == str(path) and len(str(info.value)) < 500


def test_dotted_keys_are_refused_before_tomllib_spends_quadratic_time() -> None:
    """50,000 dotted parts take tomllib minutes; the policy reader refuses the line first.
    Dots inside strings and comments are not key parts."""
    with pytest.raises(PolicyError) as info:
        parse_policy("[authority]\n" + "ladder." * 50_000 + "x = 1")
    assert info.value.line == 2 and "dotted parts" in info.value.message
    dotted = ".".join(["a"] * 40)
    policy = parse_policy(f'# {dotted}\n[writers]\n"{dotted}" = "peer"\n')
    assert policy.writers == ((dotted, "peer"),)


@pytest.mark.parametrize("skew", [MAX_CLOCK_SKEW + 1, 10**18, 2**63, -1])
def test_clock_skew_out_of_range_names_the_field(skew: int) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(f"[store]\nclock_skew_seconds = {skew}\n")
    assert (info.value.field, info.value.line) == ("store.clock_skew_seconds", 2)
    assert parse_policy(f"[store]\nclock_skew_seconds = {MAX_CLOCK_SKEW}\n").clock_skew_seconds == MAX_CLOCK_SKEW


def test_a_policy_built_in_python_is_held_to_the_skew_range() -> None:
    with pytest.raises(PolicyError) as info:
        Policy(clock_skew_seconds=10**18)
    assert info.value.field == "store.clock_skew_seconds"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (f"[authority]\nladder = {json.dumps([f'l{i}' for i in range(MAX_LEVELS + 1)])}\n"
         "default = 'l0'", "authority.ladder"),
        (f"[clearance]\nladder = {json.dumps([f'l{i}' for i in range(MAX_LEVELS + 1)])}\n"
         "default = 'l0'", "clearance.ladder"),
        (f"[clearance]\nladder = ['{'x' * (MAX_NAME_BYTES + 1)}']\ndefault = 'x'", "clearance.ladder"),
        ('[authority]\nladder = ["low", "hi\\u0007gh"]\ndefault = "low"', "authority.ladder"),
        ('[authority]\nladder = ["low", "hi\\u202egh"]\ndefault = "low"', "authority.ladder"),
        ('[writers]\n"bot\\u0000*" = "peer"', "writers.bot\x00*"),
        (f'[writers]\n"{"w" * (MAX_NAME_BYTES + 1)}" = "peer"', f"writers.{'w' * (MAX_NAME_BYTES + 1)}"),
        ("[writers]\n" + "".join(f'"w{i}" = "peer"\n' for i in range(MAX_WRITERS + 1)), "writers"),
    ],
)  # fmt: skip
def test_every_policy_field_out_of_range_names_the_field(text: str, field: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text)
    assert info.value.field == field


def test_the_ranges_admit_the_bundled_policies() -> None:
    root = Path(__file__).resolve().parent.parent / "policies"
    for path in sorted(root.glob("*.toml")):
        load_policy(path)


def test_a_policy_file_past_the_limit_is_refused_after_reading_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * MAX_POLICY_BYTES + "\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert "at most" in info.value.message
    if Path("/dev/zero").exists():
        with pytest.raises(PolicyError):
            load_policy("/dev/zero")


# -- the CLI -----------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_cli_resolve_of_dev_zero_exits_2_quickly(tmp_path: Path) -> None:
    actor_file = tmp_path / "actor.json"
    actor_file.write_text('{"id": "alice", "tenant": "acme"}')
    done = subprocess.run(
        [sys.executable, "-m", "gamma", "resolve", "/dev/zero", "--actor", str(actor_file),
         "--at", "2026-03-02T00:00:00Z"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "line 1" in done.stderr and "Traceback" not in done.stderr


def test_a_key_file_is_read_no_further_than_its_bound(tmp_path: Path) -> None:
    """A chain key file past MAX_KEY_FILE_BYTES is no key file: refused naming the file, after
    reading the bound plus one byte (``/dev/zero`` is refused at once, not read to exhaustion)."""
    path = tmp_path / "k.key"
    path.write_bytes(b"k" * MAX_KEY_FILE_BYTES)
    assert read_key_file(path) == b"k" * MAX_KEY_FILE_BYTES
    path.write_bytes(b"k" * (MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(InputError, match="at most") as info:
        read_key_file(path)
    assert info.value.source == str(path)
    for device in ("/dev/zero", "/dev/urandom"):
        if Path(device).exists():
            with pytest.raises(InputError, match="at most"):
                read_key_file(device)
    path.write_bytes(b"short\n")
    with pytest.raises(InputError, match="16 bytes"):
        read_key_file(path)
