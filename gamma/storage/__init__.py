"""Where logs live: the append-only SQLite store, its migrations, verification of the chain,
and ``sources``, which opens a log given by path (a JSONL file or a store).

Imports core only. ``sources`` is the storage layer's front: ``store`` and ``verify`` never
import it.

The private modules (``_opening``, ``_keys``, ``_append``, ``_read``) are ``store``'s parts,
imported only here in storage (a checked contract); their names are used through ``store``.
"""
