"""Where logs live: the append-only SQLite store, its migrations, verification of the chain,
and ``sources``, which opens a log given by path (a JSONL file or a store).

Imports core only. ``sources`` is the storage layer's front: ``store`` and ``verify`` never
import it.

The private modules (``_opening``, ``_keys``, ``_append``, ``_read``) are ``store``'s parts,
imported only here in storage (a checked contract); their names are used through ``store``.
"""

#: The first 16 bytes of every SQLite file: here, in the package that imports nothing, so
#: that the CLI can tell a store from a JSONL log without importing sqlite-utils.
SQLITE_HEADER = b"SQLite format 3\x00"
