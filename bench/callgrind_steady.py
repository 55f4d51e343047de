"""`bench.callgrind_cpu` with what depends on time held still: `python -m bench.callgrind_steady [its options]`.

Under valgrind on a loaded machine a call takes tens of times as long, and two of the gateway's clocks then changed
what it did inside the counted calls, differently from one run to the next: an upstream's 4 s probe ping timed out
and the link reconnected, and a handshake-era call past the HTTP face's 0.25 s JSON window went back as an SSE stream
(more work) on one side of an A/B and as one JSON body on the other. Here the upstreams' `probe_interval` and
`probe_timeout` are 60 s and the gateway's `faces.streamable.JSON_WINDOW` 600 s; everything else is
`bench.callgrind_cpu`'s. Asserts nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import callgrind_cpu, configs

PROBE_SECONDS = 60.0
JSON_WINDOW = 600.0


def steady_upstream(url: str, era: configs.Era) -> dict[str, Any]:
    return {"url": url, "era": era, "probe_interval": PROBE_SECONDS, "probe_timeout": PROBE_SECONDS}


def steady_gateway_argv(src: Path, config: Path, listen: str) -> list[str]:
    start = (f"import sys; sys.path.insert(0, {str(src)!r}); import elicitgate.faces.streamable as face; "
             f"face.JSON_WINDOW = {JSON_WINDOW}; from elicitgate.cli import app; app()")
    return [configs.PY, "-c", start, "serve", "--config", str(config), "--http", listen]


def main() -> None:
    configs.http_upstream = steady_upstream
    callgrind_cpu.gateway_argv = steady_gateway_argv
    callgrind_cpu.main()


if __name__ == "__main__":
    main()
