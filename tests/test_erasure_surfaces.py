"""Issue 30: erasure is the host's, never a model's. The MCP server offers a model no tool that
erases, and the host-bound surfaces (``Binding``, ``GovernedStore``) have no erase method: a
model can forget (retract) a fact, which keeps its value in the log for the audit, but only the
host, through ``gamma.Engine.erase`` or ``gamma erase``, destroys a value."""

from __future__ import annotations

import pytest

from gamma.integrations.binding import Binding


def test_the_binding_has_no_erase() -> None:
    assert not [name for name in dir(Binding) if "eras" in name.lower()]


def test_the_mcp_server_offers_no_erase_tool() -> None:
    mcp = pytest.importorskip("gamma.integrations.mcp")
    assert set(mcp.TOOLS) == {"recall", "remember", "forget"}
    for name, (description, schema, _) in mcp.TOOLS.items():
        assert "eras" not in name and "eras" not in description.lower(), name
        assert not {"basis", "erased", "subject"} & set(schema.get("properties", {})), name


def test_the_langgraph_store_has_no_erase() -> None:
    langgraph = pytest.importorskip("gamma.integrations.langgraph")
    assert not [name for name in dir(langgraph.GovernedStore) if "eras" in name.lower()]
