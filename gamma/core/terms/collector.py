"""A host's opt-in pause of the cyclic garbage collector around gamma's large calls.

Reading a log, folding it and encoding the resolution allocate hundreds of thousands of
objects that hold no reference cycles (reference counting frees them). With the default
thresholds the collector walks every one of them again and again: at 100k events it was
about half of ``resolve`` and of the JSON output. The collector is the process's, not
gamma's: no library code pauses it (in a threaded host one thread's pause would stop
collection for all of them, and the host's cyclic garbage would pile up while gamma
works). A caller that owns the process decides: the ``gamma`` command pauses it around
``gamma resolve``; a host may wrap a large call in ``gamma.collector_paused()``, or
``gc.freeze()`` what it keeps after loading a log.

Pauses nest and may overlap across threads: the collector is off while any is open and
is left as it was found when the last one closes, whatever happens. The objects that
outlive a large pause are handed to the oldest generation, where a full collection will
still find any garbage among them.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["PROMOTE_AT", "collector_paused"]

#: Net tracked objects a pause must leave behind to be promoted at once. A small block (one
#: engine call) is left to the youngest generation, as any other code's objects, so that a
#: caller's young cyclic garbage is not moved out of its reach each call.
PROMOTE_AT = 50_000

_LOCK = threading.Lock()
_open = 0  # pauses open now, in any thread
_was_enabled = False  # the collector's setting when the first of them opened


class collector_paused:  # lower case, as contextlib.suppress: entered as a function is
    """No automatic cyclic collection inside the block; the collector is left as it was.

    Process-wide, as the collector is: for the process's owner (a command line, a batch
    job, a host around one large load or resolve), never entered by gamma's library code.
    """

    def __enter__(self) -> None:
        global _open, _was_enabled
        with _LOCK:
            if _open == 0:
                _was_enabled = gc.isenabled()
            _open += 1
            gc.disable()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _open
        with _LOCK:
            _open -= 1
            if _open or not _was_enabled:
                return
            if gc.get_count()[0] > PROMOTE_AT and not gc.get_freeze_count():
                # what a large block built goes straight to the oldest generation (freeze
                # and unfreeze move every tracked object there, in constant time), so the
                # first collections after it do not walk it all again; only when the caller
                # froze nothing, so no object of theirs is unfrozen
                gc.freeze()
                gc.unfreeze()
            gc.enable()
