"""The cyclic garbage collector paused while gamma builds many small acyclic objects.

Reading a log, folding it and encoding the resolution allocate hundreds of thousands of
objects that hold no reference cycles (reference counting frees them). With the default
thresholds the collector would walk every one of them again and again: at 100k events it
was about half of ``resolve`` and of the JSON output. Paused, never tuned: the setting a
caller had is restored on the way out, whatever happens, and nested pauses are harmless;
objects that outlive the block are handed to the oldest generation, where a full collection
will still find any garbage among them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block; the collector is left as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                # what the block built goes straight to the oldest generation (freeze and unfreeze
                # move every tracked object there, in constant time), so the first collections
                # after it do not walk it all again; only when the caller froze nothing, so no
                # object of theirs is unfrozen
                gc.freeze()
                gc.unfreeze()
            gc.enable()
