"""`bench.callgrind_cpu` after a longer warm-up: `python -m bench.callgrind_warm [--warmup N] [its options]`.

With its 20 warm-up calls, a stdio `elicit` row counted 0.90 M and 1.22 M instructions per call in two runs of the same
`src/` (main 335ce9e): the audit store opens once the first record wants it (sqlalchemy imported and its engine made on
the event loop's thread), which under valgrind outlasts the warm-up by more or less, and the rest of that opening was
counted with the calls (callgrind showed module loading, `marshal` and the parser in the counted window). Here the
warm-up is `--warmup` calls (default 200); everything else is `bench.callgrind_cpu`'s. Asserts nothing.
"""

from __future__ import annotations

import sys

from bench import callgrind_cpu

DEFAULT_WARMUP = 200


def main() -> None:
    argv = sys.argv[1:]
    warmup = DEFAULT_WARMUP
    if "--warmup" in argv:
        at = argv.index("--warmup")
        warmup = int(argv[at + 1])
        del argv[at : at + 2]
    callgrind_cpu.WARMUP = warmup
    sys.argv = [sys.argv[0], *argv]
    callgrind_cpu.main()


if __name__ == "__main__":
    main()
