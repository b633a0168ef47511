"""Where agents already live: gamma behind an MCP server and a LangGraph store.

Both surfaces bind one actor chosen by the host (never by what a model writes)
to one ``gamma.Engine``: ``binding`` holds what they share; ``mcp`` (extra
``mcp``) and ``langgraph`` (extra ``langgraph``) each import their library, so
importing this package needs neither. Importing one without its extra raises
``MissingExtraError`` saying what to install.
"""

from __future__ import annotations

from gamma.core.terms.errors import GammaError

__all__ = ["INSTALL", "MissingExtraError", "install_hint"]

#: How to install an extra; the one place the code spells the distribution's name
#: (``[project] name`` in pyproject.toml; the import name stays ``gamma``).
INSTALL = "pip install 'gamma-governance[{extra}]'"


def install_hint(extra: str) -> str:
    return INSTALL.format(extra=extra)


class MissingExtraError(GammaError, ImportError):
    """An integration imported without the optional extra that brings its library."""

    def __init__(self, module: str, extra: str, missing: str | None) -> None:
        self.extra = extra
        super().__init__(
            f"{module} needs the optional extra {extra!r} ({missing or 'a library'} is not"
            f" installed): {install_hint(extra)}",
            name=missing,
        )
