"""Keep the control panel's full garbage collections short.

A full collection walks every tracked object, and nearly all of them are what imports
brought (Textual, Rich, asyncssh, aiohttp, transformers) and the dashboard's widgets: on
this machine 75k objects and 45-90 ms, at whatever moment the collector picks, which is
usually the moment a key press allocates a new frame. Those objects live as long as the
process, so once they are in place they are moved out of the collector's reach
(`gc.freeze`). Collections then only walk what came since: under a millisecond.
"""

from __future__ import annotations

import gc
import sys


class HeapSettler:
    """Freezes the heap each time the set of loaded modules has grown and then held still.

    Imports come in waves (startup, then a host link's asyncssh, then the engine's aiohttp
    and transformers, each in its own thread), so `tick` is called on a timer: a wave is
    over when two ticks in a row see the same number of modules. The collection before each
    freeze keeps garbage out of the frozen set, and it only walks what is not frozen yet.
    """

    def __init__(self) -> None:
        self._seen = 0
        self._settled = 0

    def tick(self) -> bool:
        """Settle the heap if an import wave has ended since the last tick: whether it did."""
        count = len(sys.modules)
        if count == self._settled:
            return False
        if count != self._seen:
            self._seen = count
            return False
        gc.collect()
        gc.freeze()
        self._settled = count
        return True
