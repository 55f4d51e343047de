"""The CLI's stderr, for the person at the terminal."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def err() -> Console:
    """stderr, in colour where it can be. Made at the first message, so a gateway that starts cleanly does not
    load rich (~1.4 MiB; its plain start-up lines are written to stderr as they are)."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)  # a long path or message stays on one line: grep-able, copy-able
