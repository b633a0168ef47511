"""One root for every error gamma raises; input errors are also ValueErrors.

Each error carries its culprit as attributes (``source``, ``line``, ``field``)
so callers can act on them, and formats them into the message so people can.
"""

from __future__ import annotations

__all__ = [
    "GammaError",
    "InputError",
    "JSONSyntaxError",
    "UnknownFieldError",
    "MissingFieldError",
    "ValueTypeError",
    "DuplicateIdError",
    "UnknownReferenceError",
    "CycleError",
    "TimestampOrderError",
    "PolicyError",
    "ActorError",
    "LimitError",
    "StoreError",
    "StoreBusyError",
    "IntegrityError",
]


class GammaError(Exception):
    """Root of every error gamma raises on purpose."""


class InputError(GammaError, ValueError):
    """Malformed or inconsistent input; names where it is and what is wrong.

    ``line`` is the 1-based physical line (None when the input has no lines),
    ``field`` the dotted field path (``visibility.roles``) or None.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.source is not None:
            where.append(self.source)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_input_error, (type(self), self.message, self.source, self.line, self.field))


def _rebuild_input_error(
    cls: type[InputError], message: str, source: str | None, line: int | None, field: str | None
) -> InputError:
    return cls(message, source=source, line=line, field=field)


class JSONSyntaxError(InputError):
    """The line is not one valid JSON object (also duplicate keys, NaN, floats)."""


class UnknownFieldError(InputError):
    """A field, an event type or a nested key that the format does not define."""


class MissingFieldError(InputError):
    """A required field is absent."""


class ValueTypeError(InputError):
    """A field holds a value of the wrong type or outside its allowed set."""


class DuplicateIdError(InputError):
    """An event id, fact id or experience id is used twice."""


class UnknownReferenceError(InputError):
    """A reference names a fact that is unknown, later, the same, or another tenant's."""


class CycleError(UnknownReferenceError):
    """A ``supersedes`` or ``depends_on`` chain leads back to the fact itself."""


class TimestampOrderError(InputError):
    """``ts`` goes backwards along the log, or ``valid_until`` is not after ``valid_from``."""


class PolicyError(InputError):
    """A policy file is malformed, or a name is not on the policy's ladders."""


class ActorError(InputError):
    """The actor (request context) is malformed."""


class LimitError(InputError):
    """Input past one of the limits SPEC §18 states (nesting, line, string or context size)."""


class StoreError(GammaError):
    """The event store cannot do what was asked."""


class StoreBusyError(StoreError):
    """Another writer held the store's lock past the timeout."""


class IntegrityError(GammaError):
    """A log or store fails verification: it was edited, truncated or reordered."""
