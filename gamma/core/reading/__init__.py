"""Reading: the one way in. ``reader`` turns any source (a path, bytes, a stream, stdin, a
store, lines, objects) into a validated ``ParsedLog``; ``events`` holds its line loop and the
strict decoder of one event; ``schema`` reads the model's declared fields and rules
(``terms.model``: each field names its ``Rule``), from which ``plain`` and ``fastpath``, its
fast decoders, and the strict checks of ``events`` are built; ``strictjson``
the strict JSON decoder; ``stated`` a derivation checked at the door; ``logcheck`` the log's
rules across events; ``convert`` the one cattrs converter; ``handbuilt`` validates events
gamma did not read.

It changes with the input format (SPEC §2, §18) and imports the terms and integrity (an
event's canonical bytes are chained as they are read).

FACE names what the floors above and the other rooms of the core may import from this
room, module by module; everything else is the room's own (tests/test_rooms.py checks every
import across rooms against it, and ``lint-imports`` the order of the rooms).
"""

FACE: dict[str, tuple[str, ...]] = {
    "convert": (
        "check_keys",
        "converter",
        "first_failure",
        "json_type",
    ),
    "events": (
        "EMPTY_FILE",
        "canonical_event",
        "check_names",
        "check_scope",
        "decode_lines",
        "dump_events",
        "event_line",
        "event_to_json",
        "load_events",
        "normal_actor",
        "parse_actor",
        "parse_events",
    ),
    "handbuilt": ("checked_log",),
    "logcheck": (
        "LogIndex",
        "MemoryIndex",
        "check_events",
        "validate_log",
    ),
    "parsed": ("ParsedLog",),
    "reader": (
        "STDIN",
        "STDIN_SOURCE",
        "decode_batch",
        "read",
        "read_bounded",
        "read_each",
        "read_line",
        "read_lines",
        "read_numbered",
        "read_object",
        "read_objects",
        "read_objects_log",
        "read_stored",
    ),
    "schema": ("STAMPED",),
    "strictjson": ("decode_json",),
}
