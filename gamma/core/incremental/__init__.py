"""Incremental: the engine's state kept between calls. ``engine`` applies appends and
answers resolutions and checks equal, byte for byte, to the pure path; ``tenants`` keeps each
tenant's fold; ``derived`` each actor class's kept phases and context lines.

It changes with what is kept and how it is updated, never with Γ's rules, which it takes from
resolving; it is the top room of the core.

FACE names what the floors above and the other rooms of the core may import from this
room, module by module; everything else is the room's own (tests/test_rooms.py checks every
import across rooms against it, and ``lint-imports`` the order of the rooms).
"""

FACE: dict[str, tuple[str, ...]] = {
    "engine": (
        "Batch",
        "Decision",
        "EngineState",
    ),
}
