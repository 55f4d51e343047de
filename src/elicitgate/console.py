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


def say(text: str, style: str | None = None) -> None:
    """One message to the person at the terminal, as written (no rich markup, no highlighting), in `style`
    (a rich colour such as "red") where the terminal shows colour."""
    err().print(text, style=style, highlight=False, markup=False, soft_wrap=True)
