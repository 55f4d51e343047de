"""What the garbage collector need not look at again.

Once the gateway has started, most of its heap lives as long as the process: the modules, the pydantic
models of every protocol revision the SDK builds at import (`mcp_types`), SQLAlchemy's, the configuration.
Python's full collection walks all of it every time (about 120,000 objects, 40-70 ms here), and under load
one comes every few hundred calls, stalling whichever request is in flight. `gc.freeze()` moves what exists
now to a generation the collector never scans; objects in it are still freed when their last reference
goes, only a cycle among them would never be.

While that heap is being built (the imports at start-up make ~140,000 objects), collections only walk it
again and again: `hold` stops them until `settle`, about a tenth of the start-up's import time.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Start-up begins: no collections until `settle` (or `release`)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def settle() -> None:
    """Everything allocated so far lives for the process: leave it out of every later collection, and
    collect again from now on if `hold` stopped it."""
    gc.freeze()
    release()


def release() -> None:
    """Collections resume if `hold` stopped them (a start-up that ended before `settle`)."""
    global _held
    if _held:
        _held = False
        gc.enable()
