"""The core: the event model, parsing and validation, policies, Γ and its result.

Imports nothing else of gamma, and no I/O library (sqlite-utils, structlog,
click): everything above builds on it. ``model`` and ``events`` define and
check the log (``fastpath`` is the one-decode way into the model, the strict
path's twin); ``policy`` the ladders and switches; ``resolver`` is Γ, a pure
fold; ``decisions`` and ``resolution`` its result; ``experiences`` the
factorial verdicts; ``render`` the text and context views; ``convert`` the one
cattrs converter; ``canonical`` and ``chain`` the canonical bytes and heads.
"""
