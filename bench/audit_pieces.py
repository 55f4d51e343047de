"""The audit trail's CPU per elicitation, piece by piece, before / after: `python -m bench.audit_pieces [--base REF]
[--runs N]`.

What the gateway spends on an elicitation's end besides relaying its answer, on `src/` as committed at `--base`
(default `main`) and on the work tree, each in a process of its own, `--runs` times alternating: the record (two
times made from floats, the record), its log line (the fields, then the line written to a file through the
gateway's own text logging) and the store's part (`AuditStore.add` of 20 batches of 500 on SQLite: the CPU of the
thread the event loop runs on, and of the process with the driver's thread). CPU time (`time.process_time`,
`time.thread_time`), microseconds per elicitation, the pieces the least disturbed of 15 repeats. Asserts nothing.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import pieces_ab

BATCH = 500
BATCHES = 20


def _best(fn: Callable[[], object], number: int = 2000) -> float:
    timer = timeit.Timer(fn, timer=time.process_time)
    return min(timer.repeat(number=number, repeat=15)) / number * 1e6


def pieces(workdir: Path) -> dict[str, float]:
    """The pieces, timed on the `elicitgate` this process imports."""
    import anyio

    from elicitgate.audit import record as audit_record
    from elicitgate.audit.store import AuditStore
    from elicitgate.logs import configure_logging, log_event

    sys.stderr = open(workdir / "lines.log", "w")  # noqa: SIM115 - the log's stream for the whole process
    configure_logging("info")
    audit = logging.getLogger("elicitgate.audit")
    now = time.time()

    def made(**id_: str) -> Any:
        return audit_record.AuditRecord(
            **id_, server="demo", mode="form", state="accepted", reason="user accepted",
            created_at=audit_record.utc(now),
            ended_at=audit_record.utc(now + 0.0123), tool="demo__confirm", client="mcp", client_id="c1",
            request_id="528", responder="client", attempts=1,
        )

    record = made()
    fields = audit_record.logged(record)
    found = {
        "the record": _best(lambda: made(id="0123456789abcdef0123456789abcdef")),  # the broker gives its id
        "the log line's fields": _best(lambda: audit_record.logged(record)),
        "the log line written": _best(lambda: log_event(audit, "elicitation.ended", fields)),
    }

    async def store() -> None:
        opened = await AuditStore.open(f"sqlite:///{workdir / 'audit.db'}")
        try:
            await opened.add([made() for _ in range(BATCH)])  # the first batch compiles, the cache fills
            batches = [[made() for _ in range(BATCH)] for _ in range(BATCHES)]
            start, start_loop = time.process_time(), time.thread_time()
            for batch in batches:
                await opened.add(batch)
            loop, whole = time.thread_time() - start_loop, time.process_time() - start
            found["stored: the event loop's thread"] = loop / (BATCH * BATCHES) * 1e6
            found["stored: with the driver's thread"] = whole / (BATCH * BATCHES) * 1e6
        finally:
            await opened.close()

    anyio.run(store)
    return found


def _pieces_in_a_workdir() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="audit-pieces-") as workdir:
        return pieces(Path(workdir))


def main() -> None:
    pieces_ab.main("bench.audit_pieces", __doc__.splitlines()[0], _pieces_in_a_workdir,
                   unit="piece, us per elicitation", digits=1)


if __name__ == "__main__":
    main()
