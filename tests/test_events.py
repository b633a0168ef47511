"""Validation of the event log and the actor (DESIGN §3-4, SPEC §2).

Every rejection is checked for its exact exception type and for the ``line``
and ``field`` it names: a validator that refuses the right input for the wrong
reason, or points at the wrong place, fails here. The culprit is put on line 3
after two good lines, so an off-by-one or a per-line counter that skips blank
lines shows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import A, G, R, V, X, actor, log, parse_lines, stamp, ts

from gamma import (
    ActorError,
    CycleError,
    DuplicateIdError,
    InputError,
    JSONSyntaxError,
    MissingFieldError,
    Policy,
    TimestampOrderError,
    UnknownFieldError,
    UnknownReferenceError,
    ValueTypeError,
    load_events,
    parse_actor,
)

GOOD = [A("F1", "k1", "v1"), A("F2", "k2", "v2")]


def good_lines() -> list[str]:
    """Two valid events, ids e1/e2, facts F1/F2, stamped at minutes 1 and 2."""
    return [json.dumps(e) for e in stamp(GOOD)]


def third(event: dict[str, Any], *, drop: tuple[str, ...] = ()) -> str:
    """``event`` stamped as the third event (id e3, minute 3), minus the ``drop`` fields."""
    body = stamp([*GOOD, event])[2]
    for name in drop:
        body.pop(name, None)
    return json.dumps(body)


def fails(
    lines: list[str],
    exc_type: type[InputError],
    *,
    line: int | None,
    field: str | None,
    policy: Policy | None = None,
) -> InputError:
    """Parse ``lines``; assert exactly ``exc_type`` was raised, naming ``line`` and ``field``."""
    with pytest.raises(InputError) as info:
        parse_lines(lines, **({"policy": policy} if policy else {}))
    error = info.value
    assert type(error) is exc_type, f"{type(error).__name__}: {error}"
    assert error.line == line, str(error)
    assert error.field == field, str(error)
    assert error.source == "test.jsonl"
    return error


def fails_on_3(
    event_or_text: dict[str, Any] | str, exc_type: type[InputError], field: str | None
) -> InputError:
    """The culprit on line 3 (after two good lines) is refused with ``exc_type`` and ``field``."""
    text = event_or_text if isinstance(event_or_text, str) else third(event_or_text)
    return fails([*good_lines(), text], exc_type, line=3, field=field)


def raw3(value_json: str, **extra: Any) -> str:
    """A third-line assert whose ``value`` is the raw JSON text ``value_json``."""
    body = stamp([*GOOD, A("F3", "k3", "PLACEHOLDER", **extra)])[2]
    return json.dumps(body).replace('"PLACEHOLDER"', value_json)


class TestBaseline:
    def test_good_lines_parse(self) -> None:
        """The fixture lines the other tests corrupt are themselves valid."""
        events = parse_lines([*good_lines(), third(A("F3", "k3", "v3"))])
        assert [e.id for e in events] == ["e1", "e2", "e3"]

    def test_id_namespaces_may_overlap(self) -> None:
        """Event ids, fact ids and experience ids are three namespaces: one string may be all three."""
        events = log(A("Z", "k", "v", id="Z"), X("Z", ["Z"]))
        assert [e.id for e in events] == ["Z", "e2"]

    def test_error_is_a_value_error(self) -> None:
        """Every input error is a gamma.InputError and a ValueError."""
        error = fails_on_3(third(A("F3", "k3", "v3"), drop=("value",)), MissingFieldError, "value")
        assert isinstance(error, ValueError)


class TestDuplicateIds:
    def test_duplicate_event_id(self) -> None:
        """A second event with an existing event id is refused on its own line, field id."""
        fails_on_3(A("F3", "k3", "v", id="e1"), DuplicateIdError, "id")

    def test_duplicate_fact_id(self) -> None:
        """A second assert of an existing fact id is refused, field fact."""
        fails_on_3(A("F1", "k3", "v"), DuplicateIdError, "fact")

    def test_duplicate_experience_id(self) -> None:
        """A second experience with an existing experience id is refused, field experience."""
        lines = [
            *good_lines(),
            third(X("X1", ["F1"])),
            json.dumps(stamp([*GOOD, X("X1", []), X("X1", [])])[3]),
        ]
        fails(lines, DuplicateIdError, line=4, field="experience")


class TestFields:
    def test_unknown_type(self) -> None:
        """An unknown event type is an UnknownFieldError on field type."""
        fails_on_3(
            {"type": "assertion", "fact": "F3", "key": "k", "value": 1}, UnknownFieldError, "type"
        )

    def test_missing_type(self) -> None:
        """An event without type is a MissingFieldError on field type."""
        fails_on_3(third(A("F3", "k3", "v"), drop=("type",)), MissingFieldError, "type")

    def test_unknown_field(self) -> None:
        """A field the format does not define is refused by name."""
        fails_on_3(A("F3", "k3", "v", colour="red"), UnknownFieldError, "colour")

    def test_field_of_another_type(self) -> None:
        """A field of another event type (a retract's reason on an assert) is unknown."""
        fails_on_3(A("F3", "k3", "v", reason="why"), UnknownFieldError, "reason")

    def test_unknown_nested_field(self) -> None:
        """An unknown key inside visibility is named with its dotted path."""
        fails_on_3(
            A("F3", "k3", "v", visibility={"roles": ["hr"], "colour": "red"}),
            UnknownFieldError,
            "visibility.colour",
        )

    @pytest.mark.parametrize("field", ["value", "key", "fact", "tenant", "ts", "actor", "id"])
    def test_missing_required_field_of_assert(self, field: str) -> None:
        """Each required field of an assert (envelope included) is refused by name when absent."""
        fails_on_3(third(A("F3", "k3", "v"), drop=(field,)), MissingFieldError, field)

    def test_missing_required_field_of_experience(self) -> None:
        """An experience without content is refused, field content."""
        fails_on_3(third(X("X1", ["F1"]), drop=("content",)), MissingFieldError, "content")

    def test_null_field(self) -> None:
        """A field written as null is a ValueTypeError on that field (leave it out instead)."""
        fails_on_3(A("F3", "k3", "v", scope=None), ValueTypeError, "scope")

    def test_null_nested_field(self) -> None:
        """A null inside visibility is named with its dotted path."""
        fails_on_3(
            A("F3", "k3", "v", visibility={"clearance": None}),
            ValueTypeError,
            "visibility.clearance",
        )

    def test_null_required_field(self) -> None:
        """A required field written as null is refused, not treated as present."""
        fails_on_3(A("F3", "k3", None), ValueTypeError, "value")


class TestJSON:
    def test_invalid_json(self) -> None:
        """A line that is not JSON is a JSONSyntaxError on its line."""
        fails_on_3('{"id": "e3", "type": "assert",', JSONSyntaxError, None)

    def test_not_an_object(self) -> None:
        """A JSON line that is not an object is refused."""
        fails_on_3('["assert", "F3"]', JSONSyntaxError, None)

    def test_duplicate_json_key(self) -> None:
        """A key written twice in one object is refused, naming the key."""
        text = third(A("F3", "k3", "v")).replace('"key": "k3"', '"key": "k3", "key": "k4"')
        fails_on_3(text, JSONSyntaxError, "key")

    def test_duplicate_nested_json_key(self) -> None:
        """A key repeated inside visibility is named with its dotted path (DESIGN §3: `visibility.roles`)."""
        text = third(A("F3", "k3", "v", visibility={"roles": ["hr"]})).replace(
            '"roles": ["hr"]', '"roles": ["hr"], "roles": ["ops"]'
        )
        fails_on_3(text, JSONSyntaxError, "visibility.roles")

    @pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
    def test_nan_and_infinity(self, constant: str) -> None:
        """NaN and Infinity are not JSON: JSONSyntaxError (SPEC §2.1), naming the field."""
        fails_on_3(raw3(constant), JSONSyntaxError, "value")

    def test_float_value(self) -> None:
        """A float value is a ValueTypeError naming the field (write decimals as strings)."""
        fails_on_3(raw3("22.5"), ValueTypeError, "value")

    def test_float_with_integral_value(self) -> None:
        """``1.0`` is a float too, even though its value is integral."""
        fails_on_3(raw3("1.0"), ValueTypeError, "value")

    def test_float_in_nested_field(self) -> None:
        """A float anywhere in the event is refused, naming its dotted path."""
        text = third(A("F3", "k3", "v", visibility={"clearance": "X"})).replace('"X"', "2.0")
        fails_on_3(text, ValueTypeError, "visibility.clearance")

    @pytest.mark.parametrize("number", [2**53, -(2**53), 10**20])
    def test_integer_beyond_safe_range(self, number: int) -> None:
        """An integer beyond ±(2^53-1) is a ValueTypeError naming the field."""
        fails_on_3(raw3(str(number)), ValueTypeError, "value")

    @pytest.mark.parametrize("number", [2**53 - 1, -(2**53 - 1), 0])
    def test_integer_at_safe_bound_is_accepted(self, number: int) -> None:
        """±(2^53-1) itself is a valid value and survives parsing unchanged."""
        events = parse_lines([*good_lines(), raw3(str(number))])
        assert events[2].value == number  # type: ignore[union-attr]

    def test_lone_surrogate(self) -> None:
        """A string holding a lone surrogate is not valid Unicode: ValueTypeError on its field."""
        fails_on_3(raw3('"abc\\ud800def"'), ValueTypeError, "value")

    def test_surrogate_pair_is_accepted(self) -> None:
        """A correctly paired surrogate escape is a valid astral character."""
        events = parse_lines([*good_lines(), raw3('"\\ud83d\\ude00"')])
        assert events[2].value == "\U0001f600"  # type: ignore[union-attr]


class TestValueTypes:
    def test_string_where_list(self) -> None:
        """depends_on given as a string, not a list, is refused on depends_on."""
        fails_on_3(A("F3", "k3", "v", depends_on="F1"), ValueTypeError, "depends_on")

    def test_int_where_string(self) -> None:
        """A key given as an integer is refused on key (no coercion)."""
        fails_on_3(A("F3", 7, "v"), ValueTypeError, "key")  # type: ignore[arg-type]

    def test_bool_for_roles(self) -> None:
        """visibility.roles given as a boolean is refused on visibility.roles."""
        fails_on_3(
            A("F3", "k3", "v", visibility={"roles": True}), ValueTypeError, "visibility.roles"
        )

    def test_string_for_bool_value_is_kept_a_string(self) -> None:
        """ "true" stays a string and true stays a boolean: values are never coerced."""
        events = log(A("F1", "a", "true"), A("F2", "b", True), A("F3", "c", 1))
        assert [e.value for e in events] == ["true", True, 1]  # type: ignore[union-attr]
        assert type(events[2].value) is int  # type: ignore[union-attr]

    @pytest.mark.parametrize("value", ["[1]", '{"a": 1}'])
    def test_value_must_be_scalar(self, value: str) -> None:
        """A list or object value is refused on value."""
        fails_on_3(raw3(value), ValueTypeError, "value")

    @pytest.mark.parametrize(
        ("field", "bad"),
        [("status", "final"), ("kind", "opinion"), ("priority", "urgent"), ("status", 1)],
    )
    def test_value_outside_its_set(self, field: str, bad: Any) -> None:
        """An enumerated field outside its set is refused on that field."""
        fails_on_3(A("F3", "k3", "v", **{field: bad}), ValueTypeError, field)

    def test_applicability_outside_its_set(self) -> None:
        """An experience's applicability outside its set is refused."""
        fails_on_3(X("X1", ["F1"], applicability="sometimes"), ValueTypeError, "applicability")

    def test_unknown_authority_level(self) -> None:
        """An authority name not on the policy's ladder is refused on authority."""
        fails_on_3(R("F1", authority="boss"), ValueTypeError, "authority")

    def test_unknown_clearance_level(self) -> None:
        """A clearance name not on the policy's ladder is refused on visibility.clearance."""
        fails_on_3(
            A("F3", "k3", "v", visibility={"clearance": "top-secret"}),
            ValueTypeError,
            "visibility.clearance",
        )

    def test_ladders_come_from_the_policy(self) -> None:
        """A name valid on a custom policy's ladder is accepted, and the default's names refused."""
        policy = Policy(authority_ladder=("low", "boss"), authority_default="low")
        parse_lines([*good_lines(), third(R("F1", authority="boss"))], policy=policy)
        fails(
            [*good_lines(), third(R("F1", authority="peer"))],
            ValueTypeError,
            line=3,
            field="authority",
            policy=policy,
        )

    @pytest.mark.parametrize("field", ["id", "fact", "key", "tenant", "actor"])
    def test_empty_id(self, field: str) -> None:
        """An empty id, fact, key, tenant or writer is refused on that field."""
        event = {**A("F3", "k3", "v"), field: ""}
        fails_on_3(event, ValueTypeError, field)

    def test_empty_role_name(self) -> None:
        """An empty role name inside visibility.roles is refused on visibility.roles."""
        fails_on_3(
            A("F3", "k3", "v", visibility={"roles": [""]}), ValueTypeError, "visibility.roles"
        )

    @pytest.mark.parametrize("scope", ["a//b", "/a", "a/", "", "a b", "a\nb", "héllo"])
    def test_bad_scope(self, scope: str) -> None:
        """A scope that is not `global` or `/`-separated non-empty segments of [A-Za-z0-9_.:-] is refused."""
        fails_on_3(A("F3", "k3", "v", scope=scope), ValueTypeError, "scope")

    @pytest.mark.parametrize("scope", ["global", "helios", "helios/launch", "a.b:c-d_e/F9"])
    def test_good_scope(self, scope: str) -> None:
        """Well-formed scopes are accepted."""
        parse_lines([*good_lines(), third(A("F3", "k3", "v", scope=scope))])


class TestGrants:
    def test_grant_with_fact_and_key(self) -> None:
        """A grant naming both a fact and a key is refused (ValueTypeError on fact)."""
        fails_on_3(G(fact="F1", key="k1", role="hr"), ValueTypeError, "fact")

    def test_grant_with_neither_fact_nor_key(self) -> None:
        """A grant naming neither a fact nor a key is refused (MissingFieldError on fact)."""
        fails_on_3(G(role="hr"), MissingFieldError, "fact")

    def test_revoke_with_role_and_to_actor(self) -> None:
        """A revoke naming both a role and an actor is refused (ValueTypeError on role)."""
        fails_on_3(V(key="k1", role="hr", to_actor="bob"), ValueTypeError, "role")

    def test_grant_with_neither_role_nor_actor(self) -> None:
        """A grant naming no grantee is refused (MissingFieldError on role)."""
        fails_on_3(G(key="k1"), MissingFieldError, "role")

    def test_grant_by_key_needs_no_asserted_fact(self) -> None:
        """A key grant is not a fact reference: it may name a key no fact has yet."""
        parse_lines([*good_lines(), third(G(key="not_yet_used", to_actor="bob"))])


class TestReferences:
    def test_reference_to_unknown_fact(self) -> None:
        """supersedes naming a fact that is never asserted is an UnknownReferenceError."""
        fails_on_3(A("F3", "k3", "v", supersedes=["F9"]), UnknownReferenceError, "supersedes[0]")

    def test_reference_names_its_list_index(self) -> None:
        """The second, bad entry of depends_on is named with its index."""
        fails_on_3(
            A("F3", "k3", "v", depends_on=["F1", "F9"]), UnknownReferenceError, "depends_on[1]"
        )

    def test_reference_to_later_fact(self) -> None:
        """depends_on naming a fact asserted on a later line is refused (not a CycleError)."""
        lines = [
            *good_lines(),
            third(A("F3", "k3", "v", depends_on=["F4"])),
            json.dumps(stamp([*GOOD, {}, A("F4", "k4", "v")])[3]),
        ]
        fails(lines, UnknownReferenceError, line=3, field="depends_on[0]")

    def test_retract_of_later_fact(self) -> None:
        """A retract may not name a fact asserted after it."""
        lines = [
            *good_lines(),
            third(R("F4")),
            json.dumps(stamp([*GOOD, {}, A("F4", "k4", "v")])[3]),
        ]
        fails(lines, UnknownReferenceError, line=3, field="fact")

    def test_reference_to_other_tenants_fact(self) -> None:
        """A retract naming another tenant's fact is refused, although the fact exists."""
        fails_on_3(R("F1", tenant="globex"), UnknownReferenceError, "fact")

    def test_uses_of_other_tenants_fact(self) -> None:
        """An experience may only use facts of its own tenant."""
        lines = [
            json.dumps(e)
            for e in stamp([A("F1", "k", "v", tenant="globex"), A("F2", "k", "v"), X("X1", ["F1"])])
        ]
        fails(lines, UnknownReferenceError, line=3, field="uses[0]")

    @pytest.mark.parametrize(
        "make",
        [
            lambda: G(fact="F9", role="hr"),
            lambda: V(fact="F9", to_actor="bob"),
            lambda: X("X1", ["F9"]),
        ],
        ids=["grant", "revoke", "uses"],
    )
    def test_every_reference_kind_is_checked(self, make: Any) -> None:
        """grant, revoke and uses references are checked like the others."""
        event = make()
        field = "uses[0]" if event["type"] == "experience" else "fact"
        fails_on_3(event, UnknownReferenceError, field)

    def test_self_reference_in_supersedes(self) -> None:
        """A fact superseding itself is a CycleError on supersedes."""
        fails_on_3(A("F3", "k3", "v", supersedes=["F3"]), CycleError, "supersedes[0]")

    def test_self_reference_in_depends_on(self) -> None:
        """A fact depending on itself is a CycleError on depends_on."""
        fails_on_3(A("F3", "k3", "v", depends_on=["F1", "F3"]), CycleError, "depends_on[1]")


class TestTimestamps:
    def test_timestamp_going_backwards(self) -> None:
        """A ts earlier than the previous event's is a TimestampOrderError on ts."""
        fails_on_3(A("F3", "k3", "v", ts=ts(1.5)), TimestampOrderError, "ts")

    def test_equal_timestamps_are_allowed(self) -> None:
        """ts may repeat: it never decreases, equal is fine."""
        parse_lines([*good_lines(), third(A("F3", "k3", "v", ts=ts(2)))])

    def test_timestamps_compare_as_instants(self) -> None:
        """10:30+02:00 is 08:30Z, before 09:02Z, although its text sorts later."""
        fails_on_3(A("F3", "k3", "v", ts="2026-03-01T10:30:00+02:00"), TimestampOrderError, "ts")

    @pytest.mark.parametrize(
        "text",
        [
            "2026-03-01T09:03:00+00:00",
            "2026-03-01t09:03:00z",
            "2026-03-01T09:03:00-00:00",
            "2026-03-01T10:03:00+01:00",
        ],
    )
    def test_offset_forms_are_accepted(self, text: str) -> None:
        """Z, z, +hh:mm and -00:00 offsets all parse to the same UTC instant."""
        events = parse_lines([*good_lines(), third(A("F3", "k3", "v", ts=text))])
        assert events[2].ts == events[1].ts.replace(minute=3)

    @pytest.mark.parametrize("field", ["ts", "valid_from", "valid_until"])
    def test_timestamp_without_offset(self, field: str) -> None:
        """A timestamp without an offset is refused on its field."""
        fails_on_3(A("F3", "k3", "v", **{field: "2026-03-01T09:03:00"}), ValueTypeError, field)

    @pytest.mark.parametrize(
        "text",
        [
            "2026-03-01 09:03:00Z",
            "2026-02-30T09:03:00Z",
            "2026-03-01T09:03:60Z",
            "2026-03-01T09:03:00.1234567Z",
            "yesterday",
            "2026-03-01T09:03:00+24:00",
        ],
    )
    def test_malformed_timestamp(self, text: str) -> None:
        """Non-RFC 3339 text, impossible dates, leap seconds, 7 fraction digits and bad offsets are refused."""
        fails_on_3(A("F3", "k3", "v", ts=text), ValueTypeError, "ts")

    @pytest.mark.parametrize(
        "text",
        [
            "\uff12\uff10\uff12\uff16-03-01T09:03:00Z",
            "2026-03-01T09:03:00.\u0661\u0662Z",
            "2026-03-01T09:03:00+\u0660\u0660:00",
        ],
        ids=["fullwidth-year", "arabic-indic-fraction", "arabic-indic-offset"],
    )
    def test_non_ascii_digits_in_timestamp(self, text: str) -> None:
        """RFC 3339 digits are ASCII: a timestamp spelled with other Unicode digits is refused."""
        fails_on_3(A("F3", "k3", "v", ts=text), ValueTypeError, "ts")

    @pytest.mark.parametrize("until", [ts(10), ts(9)])
    def test_valid_until_not_after_valid_from(self, until: str) -> None:
        """valid_until equal to or before valid_from is a TimestampOrderError on valid_until."""
        fails_on_3(
            A("F3", "k3", "v", valid_from=ts(10), valid_until=until),
            TimestampOrderError,
            "valid_until",
        )


class TestWholeInput:
    def test_blank_lines_count_for_line_numbers(self) -> None:
        """The line number is the physical line: blank and whitespace-only lines are counted."""
        lines = [
            good_lines()[0],
            "",
            "   ",
            good_lines()[1],
            "\t",
            third(A("F3", "k3", "v", colour="x")),
        ]
        fails(lines, UnknownFieldError, line=6, field="colour")

    def test_blank_lines_count_for_log_level_errors(self) -> None:
        """Log-level errors (a duplicate id) also name the physical line."""
        lines = ["", good_lines()[0], "", good_lines()[1], third(A("F3", "k3", "v", id="e2"))]
        fails(lines, DuplicateIdError, line=5, field="id")

    def test_error_after_resolution_time_still_fails(self, tmp_path: Any) -> None:
        """The whole file is validated: a bad line stamped long after any --at is still an error."""
        path = tmp_path / "log.jsonl"
        late = third(A("F3", "k3", "v", ts="2030-01-01T00:00:00Z", colour="x"))
        path.write_text("\n".join([*good_lines(), late]) + "\n", encoding="utf-8")
        with pytest.raises(UnknownFieldError) as info:
            load_events(path)
        assert (info.value.line, info.value.field, info.value.source) == (3, "colour", str(path))

    def test_file_line_numbers_match_parse(self, tmp_path: Any) -> None:
        """load_events reports the same physical line as parse_events, blank lines included."""
        path = tmp_path / "log.jsonl"
        path.write_text(good_lines()[0] + "\n\n\n" + "{oops\n", encoding="utf-8")
        with pytest.raises(JSONSyntaxError) as info:
            load_events(path)
        assert info.value.line == 4

    def test_invalid_utf8_names_its_line(self, tmp_path: Any) -> None:
        """Bytes that are not UTF-8 are an input error naming the physical line they are on (SPEC §2)."""
        path = tmp_path / "log.jsonl"
        bad = (
            third(A("F3", "k3", "PLACEHOLDER")).encode("utf-8").replace(b"PLACEHOLDER", b"\xff\xfe")
        )
        path.write_bytes(("\n".join(good_lines()) + "\n").encode("utf-8") + bad + b"\n")
        with pytest.raises(InputError) as info:
            load_events(path)
        assert (info.value.line, info.value.source) == (3, str(path))

    def test_first_error_wins(self) -> None:
        """With two bad lines, the error names the first one."""
        lines = [*good_lines(), third(A("F3", "k3", "v", colour="x")), "{oops"]
        fails(lines, UnknownFieldError, line=3, field="colour")

    def test_trailing_blank_line_is_fine(self) -> None:
        """A file ending with a newline (an empty last line) is valid."""
        assert len(parse_lines([*good_lines(), ""])) == 2


class TestActor:
    def test_defaults_are_filled_and_roles_normalised(self) -> None:
        """The actor is normalised: roles sorted and de-duplicated, clearance and scope defaulted."""
        who = parse_actor({"id": "a", "tenant": "t", "roles": ["sales", "hr", "sales"]})
        assert (who.roles, who.clearance, who.scope) == (("hr", "sales"), "public", "global")

    def test_clearance_default_comes_from_the_policy(self) -> None:
        """An actor without clearance gets the policy's default clearance."""
        policy = Policy(clearance_default="internal")
        assert actor(policy=policy).clearance == "internal"

    @pytest.mark.parametrize(
        ("obj", "field"),
        [
            ({"id": "a"}, "tenant"),
            ({"tenant": "t"}, "id"),
            ({"id": "a", "tenant": "t", "colour": "red"}, "colour"),
            ({"id": "a", "tenant": "t", "roles": True}, "roles"),
            ({"id": "a", "tenant": "t", "roles": "hr"}, "roles"),
            ({"id": "", "tenant": "t"}, "id"),
            ({"id": "a", "tenant": ""}, "tenant"),
            ({"id": "a", "tenant": "t", "scope": "/a"}, "scope"),
            ({"id": "a", "tenant": "t", "clearance": "ultra"}, "clearance"),
            ({"id": "a", "tenant": "t", "clearance": None}, "clearance"),
            ({"id": 1, "tenant": "t"}, "id"),
        ],
        ids=[
            "no-tenant",
            "no-id",
            "unknown-field",
            "bool-roles",
            "string-roles",
            "empty-id",
            "empty-tenant",
            "bad-scope",
            "unknown-clearance",
            "null-clearance",
            "int-id",
        ],
    )
    def test_bad_actor(self, obj: dict[str, Any], field: str) -> None:
        """A malformed actor is an ActorError (an InputError) naming the field."""
        with pytest.raises(ActorError) as info:
            parse_actor(obj)
        assert isinstance(info.value, InputError)
        assert info.value.field == field


class TestHostileInput:
    """Issue 11: huge integers, invisible characters in names, empty visibility lists."""

    @pytest.mark.parametrize("digits", [17, 5000])
    def test_huge_integer_is_an_input_error_naming_the_field(self, digits: int) -> None:
        """Past ±(2^53-1), and past Python's 4,300-digit int limit, the field is named."""
        fails_on_3(raw3("9" * digits), ValueTypeError, "value")

    def test_huge_integer_in_a_nested_field(self) -> None:
        text = third(A("F3", "k3", "v", visibility={"roles": ["hr"]})).replace(
            '["hr"]', "[" + "1" * 5000 + "]"
        )
        fails_on_3(text, ValueTypeError, "visibility.roles")

    @pytest.mark.parametrize("char", ["\r", "\x1b", "\u200b", "\u202e", "\ufeff", "\U000e0041", "\u2028"])
    @pytest.mark.parametrize("field", ["id", "actor", "key", "fact", "scope"])
    def test_control_and_format_characters_in_names(self, char: str, field: str) -> None:
        event = A("F3", "k3", "v", scope="s")
        body = stamp([*GOOD, event])[2]
        body[field] = body[field] + char + "x"
        fails_on_3(json.dumps(body), ValueTypeError, field)

    @pytest.mark.parametrize("field", ["role", "to_actor"])
    def test_control_characters_in_grantees(self, field: str) -> None:
        fails_on_3(G(fact="F1", **{field: "hr\x1b[8m"}), ValueTypeError, field)

    def test_control_characters_in_visibility_names(self) -> None:
        fails_on_3(
            A("F3", "k3", "v", visibility={"roles": ["hr", "ops\u202e"]}),
            ValueTypeError,
            "visibility.roles[1]",
        )

    def test_values_may_hold_any_text(self) -> None:
        """Only names are refused: a value is data, escaped on output."""
        assert log(A("F1", "k", "line one\r\nline two \u200b"))[0].value == "line one\r\nline two \u200b"

    @pytest.mark.parametrize("field", ["roles", "actors"])
    def test_empty_visibility_list_is_an_input_error(self, field: str) -> None:
        """An empty list would make the fact public silently: public is no ``visibility``."""
        fails_on_3(A("F3", "k3", "v", visibility={field: []}), ValueTypeError, f"visibility.{field}")

    @pytest.mark.parametrize("field", ["id", "tenant", "scope"])
    def test_actor_names_refuse_control_characters(self, field: str) -> None:
        body = {"id": "alice", "tenant": "acme", "scope": "global"}
        body[field] = body[field] + "\u200f"
        with pytest.raises(ActorError) as info:
            parse_actor(body)
        assert info.value.field == field

    def test_actor_roles_refuse_control_characters(self) -> None:
        with pytest.raises(ActorError) as info:
            parse_actor({"id": "alice", "tenant": "acme", "roles": ["hr", "sales\x00"]})
        assert info.value.field == "roles[1]"


# -- the fast path (gamma/core/reading/fastpath.py) is the strict path, sooner -------------------


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import jsonl, logs, malformed_logs, written_jsonl  # noqa: E402

from gamma.core.reading import events as events_module  # noqa: E402
from gamma.core.reading.events import canonical_event, parse_events  # noqa: E402
from gamma.core.reading.fastpath import fast_line  # noqa: E402
from gamma.core.terms.canonical import canonical_records, canonical_text, compact_json  # noqa: E402


class _Pairs(list):  # type: ignore[type-arg]
    """A decoded object kept as its written pairs (duplicates included)."""


class _Raw(str):
    """A number or constant kept as written."""


def _compact(row: str) -> str:
    """``row`` with the whitespace between tokens taken out, everything else kept as written
    (key order, duplicate keys, floats, NaN, long integers), so the fast path sees it."""
    try:
        value = json.loads(
            row, object_pairs_hook=_Pairs, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw
        )
    except ValueError:
        return row

    def dump(item: Any) -> str:
        if isinstance(item, _Pairs):
            return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{dump(v)}" for k, v in item) + "}"
        if isinstance(item, list):
            return "[" + ",".join(dump(v) for v in item) + "]"
        if isinstance(item, _Raw):
            return str(item)
        return json.dumps(item, ensure_ascii=False)

    return dump(value)


def _outcome(lines: list[str], policy: Policy, *, strict: bool, monkeypatch: Any) -> Any:
    """The events and canonical texts parsed, or the error's type, line, field and message."""
    return _outcome_by(lines, policy, "strict" if strict else "all", monkeypatch)


def _outcome_by(lines: list[str], policy: Policy, ways: str, monkeypatch: Any) -> Any:
    """``_outcome`` through some ways in: ``all`` (plain, fast, strict), ``fast`` (fast and
    strict: plain never accepts), or ``strict`` alone."""
    with monkeypatch.context() as patch:
        if ways != "all":  # plain never accepts
            patch.setattr(events_module, "plain_line", lambda line, policy, **_: None)
        if ways == "strict":  # nor does the fast path
            patch.setattr(events_module, "fast_line", lambda line, policy: None)
            patch.setattr(events_module, "fast_event", lambda obj, policy: None)
        try:
            parsed = parse_events(lines, policy=policy, source="t.jsonl")
        except InputError as exc:
            return (type(exc), exc.line, exc.field, str(exc))
    return [(event, canonical_event(event)) for event in parsed]


_MANY = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_MANY
@given(data=st.data())
def test_fast_path_gives_the_strict_paths_events_and_canonical_text(data: Any, monkeypatch: Any) -> None:
    log_ = data.draw(logs(max_size=12), label="log")
    compact = [_compact(row) for row in jsonl(log_.lines).split("\n")]  # mostly the fast path
    text = data.draw(st.sampled_from(("\n".join(compact), data.draw(written_jsonl(log_)))))
    lines = text.split("\n")
    fast = _outcome(lines, log_.policy, strict=False, monkeypatch=monkeypatch)
    assert fast == _outcome(lines, log_.policy, strict=True, monkeypatch=monkeypatch)
    assert fast == _outcome_by(lines, log_.policy, "fast", monkeypatch)
    assert not isinstance(fast, tuple), fast  # a valid log parses
    assert [canonical for _, canonical in fast] == [
        compact_json(json.loads(canonical)) for _, canonical in fast
    ]


def test_fast_path_takes_a_compact_log_with_utc_timestamps() -> None:
    lines = [_compact(json.dumps(e)) for e in stamp(GOOD)]
    assert all(fast_line(line, Policy()) is not None for line in lines)
    assert [canonical_event(e) for e in parse_lines(lines)] == [
        compact_json(json.loads(line)) for line in lines
    ]


@_MANY
@given(malformed=malformed_logs(), compact=st.booleans())
def test_fast_path_gives_the_strict_paths_errors(malformed: Any, compact: bool, monkeypatch: Any) -> None:
    lines = [_compact(row) if compact else row for row in malformed.rows]
    fast = _outcome(lines, malformed.policy, strict=False, monkeypatch=monkeypatch)
    assert fast == _outcome(lines, malformed.policy, strict=True, monkeypatch=monkeypatch)
    assert fast == _outcome_by(lines, malformed.policy, "fast", monkeypatch)


def test_fast_path_defers_what_it_is_not_sure_of() -> None:
    base = '{"id":"e1","ts":"2026-03-01T09:00:00Z","actor":"w","tenant":"t","type":"assert","fact":"F1","key":"k","value":%s}'
    assert fast_line(base % '"v"', Policy()) is not None
    for value in ('1.5', 'NaN', '9007199254740992', '123456789012345678901234567890', '"\\ud800"'):
        assert fast_line(base % value, Policy()) is None, value
    # a key written twice: the strict path decides
    assert fast_line(base.replace('"key":"k"', '"key":"k","key":"k"') % '"v"', Policy()) is None
    # whitespace and escapes are valid JSON: the fast path takes them (issue 27)
    assert fast_line(base.replace('"key":"k"', '"key": "k"') % '"v"', Policy()) is not None
    assert fast_line(base % '"\\u0076"', Policy()) is not None
    # and the strict path names the field, as SPEC §2 says
    with pytest.raises(JSONSyntaxError) as info:
        parse_lines([base.replace('"key":"k"', '"key":"k","key":"k"') % '"v"'])
    assert info.value.line == 1 and info.value.field == "key"
    with pytest.raises(ValueTypeError) as info:
        parse_lines([base % "9007199254740992"])
    assert info.value.field == "value"


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text()
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )


@given(_json_values())
def test_canonical_text_is_byte_equal_to_compact_json(value: Any) -> None:
    try:
        expected = compact_json(value)
        expected.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: never in decoded input
        return
    assert canonical_text(value) == expected


def test_fast_path_takes_every_event_type() -> None:
    """The fast path is no fast path if it defers a whole type (each line here is canonical)."""
    lines = [
        '{"actor":"w","fact":"F1","id":"e1","key":"k","tenant":"t","ts":"2026-03-01T09:00:00Z","type":"assert","value":1}',
        '{"actor":"w","fact":"F1","id":"e2","tenant":"t","ts":"2026-03-01T09:00:01Z","type":"promote"}',
        '{"actor":"w","fact":"F1","id":"e3","role":"r","tenant":"t","ts":"2026-03-01T09:00:02Z","type":"grant"}',
        '{"actor":"w","id":"e4","key":"k","tenant":"t","to_actor":"a","ts":"2026-03-01T09:00:03Z","type":"revoke"}',
        '{"actor":"w","content":"c","experience":"X1","id":"e5","tenant":"t","ts":"2026-03-01T09:00:04Z","type":"experience","uses":["F1"]}',
        '{"actor":"w","fact":"F1","id":"e6","reason":"r","tenant":"t","ts":"2026-03-01T09:00:05Z","type":"retract"}',
    ]
    for line in lines:
        fast = fast_line(line, Policy())
        assert fast is not None, line
        assert fast[1] == line


# -- the reader's heads and the paused collector --------------------------------------------

import gc  # noqa: E402

from strategies import actors  # noqa: E402

from gamma.core.integrity.chain import head_of  # noqa: E402
from gamma.core.integrity.merkle import CompactRange, TreeBuilder, leaf_hash, tree_head_of  # noqa: E402
from gamma.core.reading.convert import converter  # noqa: E402
from gamma.core.reading.parsed import ParsedLog  # noqa: E402
from gamma.core.resolving.resolver import resolve  # noqa: E402
from gamma.core.terms.collector import PROMOTE_AT, collector_paused  # noqa: E402
from gamma.core.terms.decisions import Admitted, Excluded, Reason  # noqa: E402


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 4095, 4096, 4097, 8192, 12289])
def test_tree_builder_gives_the_compact_ranges_head(size: int) -> None:
    """Batches are perfect subtrees and the pairing carries an odd node up: the same root as
    RFC 9162's split at the largest power of two, at every size around a batch's edge."""
    datas = [f"leaf {i}".encode() for i in range(size)]
    compact, builder = CompactRange(), TreeBuilder()
    for data in datas:
        compact.append(leaf_hash(data))
        builder.add(data)
    assert builder.head() == compact.head()


@_MANY
@given(data=st.data())
def test_the_readers_heads_are_the_heads_of_its_canonical_texts(data: Any) -> None:
    log_ = data.draw(logs(max_size=12), label="log")
    text = data.draw(st.sampled_from((jsonl(log_.lines), data.draw(written_jsonl(log_)))))
    parsed = parse_events(text.split("\n"), policy=log_.policy)
    canonical = [canonical_event(event) for event in parsed]
    assert isinstance(parsed, ParsedLog)
    assert parsed.heads == (head_of(canonical), tree_head_of(canonical))
    assert parsed[:].heads == parsed.heads  # the whole-length prefix is the same log
    if parsed:
        assert parsed[: len(parsed) - 1].heads is None  # a shorter one has its heads computed


def test_resolve_still_checks_a_given_head_against_the_readers() -> None:
    parsed = parse_lines([json.dumps(e) for e in stamp(GOOD)])
    assert isinstance(parsed, ParsedLog) and parsed.heads is not None
    who, at = actor(), "2026-12-31T00:00:00Z"
    good = resolve(parsed, who, at)
    assert (good.log, good.tree) == parsed.heads
    assert resolve(parsed, who, at, head=good.log, tree=good.tree) == good
    with pytest.raises(InputError) as info:
        resolve(parsed, who, at, head="0" * 64)
    assert info.value.field == "head"
    earlier = resolve(parsed, who, stamp(GOOD)[0]["ts"])  # a prefix: its heads, computed
    assert earlier.log == head_of([canonical_event(parsed[0])])
    assert resolve(tuple(parsed), who, at).log == good.log  # a plain tuple: computed, equal


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_and_resolving_leave_the_collector_as_it_was(enabled: bool) -> None:
    lines = [json.dumps(e) for e in stamp(GOOD)]
    was, thresholds = gc.isenabled(), gc.get_threshold()
    try:
        gc.enable() if enabled else gc.disable()
        parsed = parse_lines(lines)
        assert gc.isenabled() is enabled
        resolution = resolve(parsed, actor(), "2026-12-31T00:00:00Z")
        assert resolution.to_json() and gc.isenabled() is enabled
        with pytest.raises(InputError):
            parse_lines([*lines, "{"])
        assert gc.isenabled() is enabled
        assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    finally:
        gc.enable() if was else gc.disable()


def test_a_pause_unfreezes_nothing_the_caller_froze() -> None:
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        assert count > 0
        with collector_paused():
            kept = [[] for _ in range(PROMOTE_AT + 1000)]  # large enough to be promoted
        assert kept and gc.isenabled() and gc.get_freeze_count() == count
    finally:
        gc.unfreeze()


@_MANY
@given(data=st.data())
def test_a_resolutions_records_are_unstructured_as_the_converter_does(data: Any) -> None:
    log_ = data.draw(logs(max_size=16), label="log")
    parsed = parse_events(jsonl(log_.lines).split("\n"), policy=log_.policy)
    who = data.draw(actors(log_), label="actor")
    resolution = resolve(parsed, who, "2030-01-01T00:00:00Z", log_.policy)
    body = resolution._body()
    for name in ("admitted", "excluded", "ignored"):
        unstructured = [converter.unstructure(item) for item in getattr(resolution, name)]
        assert body[name] == unstructured
        # and its JSON, encoded from the records themselves, is byte for byte their dicts'
        assert resolution._texts[name] == compact_json(unstructured).encode("utf-8")


def test_records_encode_every_character_as_compact_json_does() -> None:
    """``canonical_records`` (msgspec) against ``compact_json`` (the standard library) on
    strings holding every code point but the surrogates, quotes, backslashes and controls."""
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    records = [
        Admitted(fact='F"1\\', key=text, value=text, scope="global", authority="\u2028",
                 kind="fact", priority="hard", needs_recheck=True),
        Admitted(fact="F2", key="k", value=-(2**53 - 1), scope="a/b", authority="x", kind="rule",
                 priority="soft"),
        Excluded(fact=text[:40], key=None, reasons=(Reason("expired", (text[-9:],), ()),)),
    ]  # fmt: skip
    assert canonical_records(records) == compact_json(
        [converter.unstructure(record) for record in records]
    ).encode("utf-8")


def test_a_large_pause_hands_what_it_built_to_the_oldest_generation() -> None:
    gc.collect()
    with collector_paused():
        kept = [[] for _ in range(PROMOTE_AT + 1000)]
    assert gc.get_count()[0] < PROMOTE_AT  # promoted: not waiting in the youngest generation
    assert gc.get_freeze_count() == 0 and gc.isenabled() and kept


def test_a_lone_surrogate_in_a_python_str_line_is_an_input_error_naming_the_field() -> None:
    """A str line from Python may hold a surrogate code point itself, not only its escape."""
    line = ('{"id":"e1","type":"assert","ts":"2026-03-01T09:00:00Z","actor":"w","tenant":"acme",'
            '"fact":"F1","key":"k1","value":"x\ud800"}')
    with pytest.raises(ValueTypeError) as raised:
        parse_events([line])
    assert (raised.value.line, raised.value.field) == (1, "value")


from strategies import probe_times  # noqa: E402

from gamma.core.reading.events import load_for_resolution  # noqa: E402
from gamma.core.terms.model import heard_by  # noqa: E402


@_MANY
@given(data=st.data())
def test_a_log_read_for_one_resolution_resolves_as_the_log_does(
    data: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``gamma resolve``'s read of a file: the same events, the same resolution byte for byte
    at any time, the heads of the prefix heard by then taken from the reader (and right), and
    no canonical text kept on any event."""
    log_ = data.draw(logs(max_size=16), label="log")
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    path.write_text(jsonl(log_.lines) + "\n", encoding="utf-8")
    who = data.draw(actors(log_), label="actor")
    at = data.draw(probe_times(log_), label="at")
    lean = load_for_resolution(path, at, policy=log_.policy)
    full = load_events(path, policy=log_.policy)
    assert lean == full
    assert all(event._canonical is None for event in lean)
    prefix = heard_by(lean, at)
    texts = [canonical_event(event) for event in heard_by(full, at)]
    assert lean.heads_of(len(prefix)) == (head_of(texts), tree_head_of(texts))
    got = resolve(lean, who, at, log_.policy)
    assert got.to_json() == resolve(full, who, at, log_.policy).to_json()


from collections.abc import Iterable  # noqa: E402

from gamma.core.reading.plain import plain_line  # noqa: E402


def _parsed_or_error(lines: Iterable[str], policy: Policy) -> Any:
    """The events and canonical texts parsed from ``lines``, or the error's type, line, field
    and message."""
    try:
        parsed = parse_events(lines, policy=policy, source="t.jsonl")
    except InputError as exc:
        return (type(exc), exc.line, exc.field, str(exc))
    return [(event, canonical_event(event)) for event in parsed]


@_MANY
@given(data=st.data(), chunk=st.integers(1, 3))
def test_a_list_scanned_for_plainness_a_chunk_at_a_time_parses_as_lines_one_by_one(
    data: Any, chunk: int, monkeypatch: Any
) -> None:
    """``parse_events`` of a list checks that it is plain a chunk of lines at a time (an
    iterator's lines are checked one by one): the same events, texts and errors, whichever
    chunk holds a line that is not plain (escapes, non-ASCII, whitespace, malformed rows)."""
    if data.draw(st.booleans(), label="valid"):
        log_ = data.draw(logs(max_size=10), label="log")
        lines, policy = data.draw(written_jsonl(log_)).split("\n"), log_.policy
    else:
        malformed = data.draw(malformed_logs(), label="malformed")
        lines, policy = malformed.rows, malformed.policy
    monkeypatch.setattr(events_module, "_PLAIN_CHUNK", chunk)
    assert _parsed_or_error(list(lines), policy) == _parsed_or_error(iter(lines), policy)


def test_a_plain_list_is_read_as_plain_without_scanning_each_line(monkeypatch: Any) -> None:
    lines = good_lines()
    seen: list[bool] = []

    def recording(line: str | bytes, policy: Any, *, known_plain: bool = False) -> Any:
        seen.append(known_plain)
        return plain_line(line, policy, known_plain=known_plain)

    monkeypatch.setattr(events_module, "plain_line", recording)
    parse_events(lines)
    parse_events(iter(lines))
    parse_events([*lines[:1], lines[1].replace('"v2"', '"v\\u00e9"')])  # one line not plain
    assert seen == [True, True, False, False, False, False]


def test_a_list_with_one_line_not_plain_is_not_read_as_plain() -> None:
    """A line the plain decoder would take wrongly if it were told the list is plain: an
    escape that shortens it by 4 and two zero-width spaces that lengthen its UTF-8 by 4, so
    the length rule cannot see them, and an actor name that is not printable."""
    sneaky = (
        '{"actor":"\u200b\u200b","fact":"F3","id":"e3","key":"k3","tenant":"acme",'
        '"ts":"2026-03-01T09:03:00Z","type":"assert","value":"\\u00e9"}'
    )  # in the line: two U+200B as they are, and the six characters of an escape
    lines = [*good_lines(), sneaky]
    assert plain_line(lines[2], Policy(), known_plain=True) is not None  # it would be taken
    error = _parsed_or_error(lines, Policy())
    assert error == _parsed_or_error(iter(lines), Policy())
    assert error[:3] == (ValueTypeError, 3, "actor"), error
