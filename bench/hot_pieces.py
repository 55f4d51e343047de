"""The stdio hot path's bookkeeping, piece by piece, before / after: `python -m bench.hot_pieces [--base REF]
[--runs N]`.

Each piece an elicitation (or a request) pays for, timed alone on `src/` as committed at `--base` (default `main`)
and on the work tree, each in a process of its own, `--runs` times alternating: the audit record, the fields of
its log line, a new `Elicitation` (its id), the text log line's time, the era rule for a request without `_meta`, a
2026-07-28 request's `client_params`. Microseconds, the minimum of 25 x 3,000 calls (the least disturbed by other
work on the machine). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _best(fn: Callable[[], object], number: int = 3000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=25)) / number * 1e6


def pieces() -> dict[str, float]:
    """The pieces, timed on the `elicitgate` this process imports."""
    from elicitgate import logs, sdk
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
            sdk.no_channel(), "2026-07-28", {"name": "mcp", "version": "1"}, {"elicitation": {}}
        ).client_params

    client_params()
    return {
        "AuditRecord()": _best(lambda: audit_record.AuditRecord(**kw)),
        "the log line's fields": _best(fields),
        "Elicitation() with its id": _best(lambda: Elicitation(server="s", mode="form", params={}, deadline=0.0)),
        "formatTime": _best(lambda: formatter.formatTime(line)),
        "has_modern_envelope, no _meta": _best(lambda: sdk.has_modern_envelope({"name": "echo", "arguments": {}})),
        "client_params, 2026-07-28 request": _best(client_params),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.hot_pieces", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--src", help=argparse.SUPPRESS)  # the child: time the pieces of this source tree
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
        import elicitgate

        assert elicitgate.__file__ is not None and elicitgate.__file__.startswith(args.src), elicitgate.__file__
        print(json.dumps(pieces()))
        return
    from bench.ab import export_src

    sources = {"base": export_src(args.base), "work": ROOT / "src"}
    found: dict[str, list[dict[str, float]]] = {label: [] for label in sources}
    for _ in range(args.runs):
        for label, src in sources.items():
            out = subprocess.run([sys.executable, "-m", "bench.hot_pieces", "--src", str(src)], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout
            found[label].append(json.loads(out))
    print("| piece | base us | work us |\n|---|---:|---:|")
    for piece in found["base"][0]:
        base = ", ".join(f"{run[piece]:.2f}" for run in found["base"])
        work = ", ".join(f"{run[piece]:.2f}" for run in found["work"])
        print(f"| {piece} | {base} | {work} |")


if __name__ == "__main__":
    main()
