"""What the stdio hot path's cheaper bookkeeping makes is what the plain way made: an elicitation's end logged with
the fields `as_json` gives its stored row, an id shaped as `uuid4().hex`, the text log line's time as
`logging.Formatter` writes it, and the era rule as the SDK's."""

from __future__ import annotations

import logging
import random
import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from mcp.server import runner

from elicitgate import _compat
from elicitgate.audit.record import FIELDS, AuditRecord, as_json, logged, utc
from elicitgate.elicitation.model import Elicitation, new_id
from elicitgate.logs import TEXT_FORMAT, _TextFormatter  # pyright: ignore[reportPrivateUsage]

optional_text = st.none() | st.text(max_size=20)


@given(
    created=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    took=st.floats(min_value=0, max_value=1e5, allow_nan=False),
    tool=optional_text,
    principal=optional_text,
    content=st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
def test_the_logged_fields_are_the_stored_rows_json_without_its_content(
    created: float, took: float, tool: str | None, principal: str | None, content: dict[str, int] | None
):
    record = AuditRecord(
        server="demo", mode="form", state="accepted", reason="user accepted", created_at=utc(created),
        ended_at=utc(created + took), tool=tool, principal=principal, attempts=1, responder="client", content=content,
    )
    expected = as_json(record.row())
    del expected["content"]
    fields = logged(record)
    assert fields == expected and list(fields) == [name for name in FIELDS if name != "content"]


def test_an_elicitations_id_is_shaped_as_a_random_uuid4_hex():
    ids = {new_id() for _ in range(2000)} | {Elicitation(server="s", mode="form", params={}, deadline=0).id}
    assert len(ids) == 2001
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_the_text_lines_time_is_the_standard_formatters_second_after_second():
    ours, standard = _TextFormatter(TEXT_FORMAT), logging.Formatter(TEXT_FORMAT)
    rng = random.Random(34)
    base = datetime(2026, 11, 26, 20, 0, tzinfo=UTC).timestamp()
    times = sorted(base + rng.uniform(0, 5) for _ in range(200)) + [rng.uniform(0, 4e9) for _ in range(200)]
    for created in times:
        record = logging.LogRecord("elicitgate.audit", logging.INFO, "x", 0, "event", (), None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.formatTime(record) == standard.formatTime(record)
        assert ours.formatTime(record, "%H:%M") == standard.formatTime(record, "%H:%M")


@given(st.none() | st.dictionaries(
    st.sampled_from(["_meta", "name", "arguments"]),
    st.none() | st.integers() | st.dictionaries(
        st.sampled_from(["io.modelcontextprotocol/protocolVersion", "progressToken"]), st.text(max_size=3)),
))
def test_the_era_rule_is_the_sdks(params: dict[str, object] | None):
    assert _compat.has_modern_envelope(params) == runner._has_modern_envelope(params)  # pyright: ignore[reportPrivateUsage]
