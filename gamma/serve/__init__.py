"""``gamma serve``: Γ as a decision point over HTTP for many agents (extra ``gamma-governance[serve]``).

The room above the integrations and below the CLI: the only one that imports
Starlette, uvicorn or prometheus_client. The endpoints are pure functions of a
view of the log at one position, the caller and the request (``endpoints``), so
the decision log can replay them; the app adds authentication, freshness
tokens, limits and metrics around them.
"""
