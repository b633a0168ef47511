"""The server's refusals: each maps to one HTTP status and a JSON body without a traceback."""

from __future__ import annotations

from gamma.core.terms.errors import GammaError

__all__ = ["ServeError", "Unauthenticated", "Forbidden", "NotFresh", "DecisionLogError"]


class ServeError(GammaError):
    """A refusal of the server; ``status`` is its HTTP status."""

    status = 500


class Unauthenticated(ServeError):
    """No credentials, or credentials that name no caller (401)."""

    status = 401


class Forbidden(ServeError):
    """An authenticated caller asked for what only an auditor may ask (403)."""

    status = 403


class NotFresh(ServeError):
    """The log did not reach the requested freshness token within the wait limit (503)."""

    status = 503


class DecisionLogError(ServeError):
    """The decision log could not be written: the request fails closed (503)."""

    status = 503
