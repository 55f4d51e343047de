"""The last ended elicitations' summaries (the admin API's `state=ended`), kept compact.

A summary as a dict of its 13 keys is 480 bytes; its values in a tuple ~300 with their id string and two floats.
A busy gateway holds the last 1,000 for good, and they filled its heap over its first thousand questions: 0.3 MiB,
a sixth of what it grew by over a million (bench/README.md, "A million completed questions"). So the ends are kept
in slots made once, at the first end: each id's 16 bytes (an id as `new_id` makes it, 32 lowercase hex digits) in
one bytearray, the two times in one array of doubles, and the other ten values as one tuple that ends alike (the
same server, mode, client, state and reason) share: ~40 bytes a slot, and nothing allocated per end that stays.

An end is put in its slot after it is added (`settle`: the broker's, once the answer is on its way; every read
first): `add`, on the answer's way, only notes the elicitation, whose summary no longer changes once it ended."""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from elicitgate.elicitation.model import Elicitation, summary_of
from elicitgate.json_shapes import JsonObject

KEPT = 1000
ID_BYTES = 16
"""An id of `new_id`'s shape, as bytes."""
SHAPES_KEPT = 256
"""Distinct value tuples remembered for sharing (then forgotten all at once: bounded whatever the ends)."""
UNSETTLED = 16
"""Ends noted and not yet in their slots at most (`add` settles them past that)."""


class RecentEnds:
    """The summaries of the last `size` elicitations that ended, oldest first. Reads give each as a fresh dict
    (`Elicitation.summary()`'s keys, in its order), so a caller changing one changes nothing kept."""

    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._added = 0
        """Ends added since the start: the next slot is `_added % _size`."""
        self._ids = bytearray()
        self._odd_ids: dict[int, str] = {}
        """Slot -> an id not of `new_id`'s shape (kept as it is)."""
        self._times = array("d")
        """Per slot: created_at, duration_s."""
        self._rest: list[tuple[object, ...] | None] = []
        """Per slot: the summary's other values, from `server` to `reason`."""
        self._shapes: dict[tuple[object, ...], tuple[object, ...]] = {}
        self._unsettled: list[Elicitation] = []
        """Ended, not yet in their slots (`settle`), oldest first."""

    def add(self, el: Elicitation) -> None:
        """`el` ended: noted, put in its slot at the next `settle` (or read)."""
        if not self._rest:  # the slots, once: a gateway nobody is asked through never makes them
            self._ids = bytearray(ID_BYTES * self._size)
            self._times = array("d", bytes(16 * self._size))
            self._rest = [None] * self._size
        unsettled = self._unsettled
        unsettled.append(el)
        if len(unsettled) >= UNSETTLED:
            self.settle()

    def settle(self) -> None:
        """The ends noted since the last, each in its slot, oldest first."""
        if self._unsettled:
            unsettled, self._unsettled = self._unsettled, []
            for el in unsettled:
                self._put(el)

    def _put(self, el: Elicitation) -> None:
        row = el.summary_row()
        slot = self._added % self._size
        self._added += 1
        id_ = row[0]
        raw = _id_bytes(id_)
        self._odd_ids.pop(slot, None)
        if raw is None:
            self._odd_ids[slot] = str(id_)
            raw = bytes(ID_BYTES)
        self._ids[slot * ID_BYTES : (slot + 1) * ID_BYTES] = raw
        self._times[2 * slot], self._times[2 * slot + 1] = row[11], row[12]
        rest = row[1:11]
        try:
            shared = self._shapes.get(rest)
        except TypeError:  # a value that cannot be hashed (a mode the upstream sent as a list): kept unshared
            self._rest[slot] = rest
            return
        if shared is None:
            if len(self._shapes) >= SHAPES_KEPT:
                self._shapes.clear()
            shared = self._shapes[rest] = rest
        self._rest[slot] = shared

    def find(self, id_: str) -> JsonObject | None:
        """The summary of the elicitation `id_` (the newest first); None when it is not among them."""
        self.settle()
        raw = _id_bytes(id_)
        found = -1
        if raw is not None:
            at = self._ids.find(raw)
            while at != -1:
                slot, off = divmod(at, ID_BYTES)
                if not off and slot not in self._odd_ids and self._age(slot) < len(self):
                    found = slot if found == -1 or self._age(slot) < self._age(found) else found
                at = self._ids.find(raw, at + 1)
        else:
            for slot, odd in self._odd_ids.items():
                if odd == id_ and self._age(slot) < len(self) and (found == -1 or self._age(slot) < self._age(found)):
                    found = slot
        return None if found == -1 else self._summary(found)

    def __len__(self) -> int:
        self.settle()
        return self._kept()

    def __iter__(self) -> Iterator[JsonObject]:
        return (self._summary(self._slot(index)) for index in range(len(self)))

    def __reversed__(self) -> Iterator[JsonObject]:
        return (self._summary(self._slot(index)) for index in reversed(range(len(self))))

    def __getitem__(self, index: int) -> JsonObject:
        count = len(self)
        if not -count <= index < count:
            raise IndexError("RecentEnds index out of range")
        return self._summary(self._slot(index % count))

    def _slot(self, index: int) -> int:
        """The slot of the `index`th kept end, oldest first."""
        return (self._added - self._kept() + index) % self._size

    def _kept(self) -> int:
        """How many ends the slots hold (settled)."""
        return min(self._added, self._size)

    def _age(self, slot: int) -> int:
        """How many ends came after the one in `slot` (its own slot's last)."""
        return (self._added - 1 - slot) % self._size

    def _summary(self, slot: int) -> JsonObject:
        odd = self._odd_ids.get(slot)
        id_ = odd if odd is not None else self._ids[slot * ID_BYTES : (slot + 1) * ID_BYTES].hex()
        rest = self._rest[slot]
        assert rest is not None
        return summary_of((id_, *rest, self._times[2 * slot], self._times[2 * slot + 1]))


def _id_bytes(id_: object) -> bytes | None:
    """`id_`'s 16 bytes when it is 32 lowercase hex digits (as `new_id` makes them), else None."""
    if not isinstance(id_, str) or len(id_) != 2 * ID_BYTES:
        return None
    try:
        raw = bytes.fromhex(id_)
    except ValueError:
        return None
    return raw if raw.hex() == id_ else None
