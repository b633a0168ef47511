"""The cyclic garbage collector paused while gamma builds many small acyclic objects.

Reading a log, folding it and encoding the resolution allocate hundreds of thousands of
objects that hold no reference cycles (reference counting frees them). With the default
thresholds the collector would walk every one of them again and again: at 100k events it
was about half of ``resolve`` and of the JSON output. Paused, never tuned: the setting a
caller had is restored on the way out, whatever happens, and nested pauses are harmless;
the objects that outlive a large block are handed to the oldest generation, where a full
collection will still find any garbage among them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PROMOTE_AT", "collector_paused"]

#: Net tracked objects a block must leave behind to be promoted at once. A small block (one
#: resolution of an engine's turn) is left to the youngest generation, as any other code's
#: objects, so that a caller's young cyclic garbage is not moved out of its reach each call.
PROMOTE_AT = 50_000


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block; the collector is left as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > PROMOTE_AT and not gc.get_freeze_count():
                # what a large block built goes straight to the oldest generation (freeze and
                # unfreeze move every tracked object there, in constant time), so the first
                # collections after it do not walk it all again; only when the caller froze
                # nothing, so no object of theirs is unfrozen
                gc.freeze()
                gc.unfreeze()
            gc.enable()
