"""The last ended elicitations' summaries (the admin API's `state=ended`), kept compact.

A summary as a dict of its 13 keys is 480 bytes; its values in a tuple 160, the values themselves being shared
(server, mode, state, reason) or small (the id, two floats). A busy gateway holds the last 1,000 for good: 0.3 MiB
less of its RSS (bench/README.md, "A million completed questions")."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from elicitgate.elicitation.model import Elicitation, summary_of
from elicitgate.json_shapes import JsonObject

KEPT = 1000


class RecentEnds:
    """The summaries of the last `size` elicitations that ended, oldest first. Reads give each as a fresh dict
    (`Elicitation.summary()`'s keys, in its order), so a caller changing one changes nothing kept."""

    def __init__(self, size: int = KEPT) -> None:
        self._rows: deque[tuple[object, ...]] = deque(maxlen=size)

    def add(self, el: Elicitation) -> None:
        self._rows.append(el.summary_row())

    def find(self, id_: str) -> JsonObject | None:
        """The summary of the elicitation `id_` (the newest first); None when it is not among them."""
        for row in reversed(self._rows):
            if row[0] == id_:
                return summary_of(row)
        return None

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[JsonObject]:
        return (summary_of(row) for row in self._rows)

    def __reversed__(self) -> Iterator[JsonObject]:
        return (summary_of(row) for row in reversed(self._rows))

    def __getitem__(self, index: int) -> JsonObject:
        return summary_of(self._rows[index])
