"""The stdio hot path's bookkeeping, piece by piece, before / after: `python -m bench.hot_pieces [--base REF]
[--runs N]`.

Each piece an elicitation (or a request) pays for, timed alone on `src/` as committed at `--base` (default `main`)
and on the work tree, each in a process of its own, `--runs` times alternating: the audit record, the fields of
its log line, a new `Elicitation` (its id), the text log line's time, the era rule for a request without `_meta`, a
2026-07-28 request's `client_params`. Microseconds, the minimum of 25 x 3,000 calls (the least disturbed by other
work on the machine). Asserts nothing.
"""

from __future__ import annotations

import logging
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench import pieces_ab


def _best(fn: Callable[[], object], number: int = 3000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=25)) / number * 1e6


def pieces() -> dict[str, float]:
    """The pieces, timed on the `elicitgate` this process imports."""
    from elicitgate import _compat, logs
    from elicitgate.audit import record as audit_record
    from elicitgate.elicitation.model import Elicitation
    from elicitgate.faces.modern import EnvelopeConnection

    now = datetime.now(UTC)
    kw: dict[str, Any] = dict(
        server="demo", mode="form", state="accepted", reason="user accepted", created_at=now, ended_at=now,
        id="x" * 32, tool="demo__confirm", client="mcp", client_id="c1", principal=None, request_id="528",
        responder="client", attempts=1,
    )
    record = audit_record.AuditRecord(**kw)
    logged = getattr(audit_record, "logged", None)

    def fields() -> object:
        if logged is not None:
            return logged(record)
        out = audit_record.as_json(record.row())
        del out["content"]
        return out

    formatter = logs._TextFormatter(logs.TEXT_FORMAT)  # pyright: ignore[reportPrivateUsage]
    line = logging.LogRecord("elicitgate.audit", logging.INFO, "x", 0, "event", (), None)

    def client_params() -> object:
        return EnvelopeConnection(
            _compat.no_channel(), "2026-07-28", {"name": "mcp", "version": "1"}, {"elicitation": {}}
        ).client_params

    client_params()
    return {
        "AuditRecord()": _best(lambda: audit_record.AuditRecord(**kw)),
        "the log line's fields": _best(fields),
        "Elicitation() with its id": _best(lambda: Elicitation(server="s", mode="form", params={}, deadline=0.0)),
        "formatTime": _best(lambda: formatter.formatTime(line)),
        "has_modern_envelope, no _meta": _best(lambda: _compat.has_modern_envelope({"name": "echo", "arguments": {}})),
        "client_params, 2026-07-28 request": _best(client_params),
    }


def main() -> None:
    pieces_ab.main("bench.hot_pieces", __doc__.splitlines()[0], pieces, unit="piece, us", digits=2)


if __name__ == "__main__":
    main()
