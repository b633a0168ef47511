"""The core: the event model, reading, integrity, Γ and its views, and the engine's kept state.

Imports nothing else of gamma, and no I/O library (sqlite-utils, structlog, click):
everything above builds on it. It is five rooms, each importing only the rooms below it
(ARCHITECTURE.md, "The core's rooms"): ``incremental`` (the engine) over ``resolving`` (Γ,
a pure fold, and its result and views) over ``reading`` (the one way in) over ``integrity``
(chain, Merkle tree, commitments) over ``terms`` (the model, codes, errors, limits,
canonical JSON, policies). Each room's ``FACE`` names what may be imported from it.
"""
