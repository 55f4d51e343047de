"""The question's work alone, in one process: `python -m bench.question_work [--questions N] [--repeat N]`.

`bench.lean_work_relay`'s `QuestionWork` driven without pipes or peers: for each question, the client's `tools/call`,
the server's `elicitation/create`, the client's answer and the server's result, handed to it as parsed messages as
its protocols hand them (what it writes is kept in a list), then one loop turn for what follows the answer (its
metrics, log line and audit record; the log line to /dev/null, the audit trail's writer running on a SQLite file in
a temporary directory). The same four messages through `bench.lean_relay`'s `Lines` are the lean relay's share.
Prints the calls per question (cProfile's count of Python and C calls, the driver's own left out: they do not move
with the machine's load) by module, the median wall time of each stage of a question (the call, the push, the
answer, the result, the loop turn after it, in which its end is recorded), and the CPU
time per question (the fastest of `--repeat` rounds of `--questions`; every thread of the process). Asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import pstats
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import uvloop

from bench import lean_relay
from bench.lean_work_relay import Lines, QuestionWork, started_work

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "Yes?"}}, "required": ["ok"]}
"""The demo server's `confirm` form (`bench.latency`'s `elicit`)."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "bench"}},
}


def messages(n: int) -> tuple[bytes, bytes, Callable[[str], bytes], bytes]:
    """Question `n`'s four lines: the call, the server's push, the client's answer (to the relay's id), the result."""
    call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "confirm", "arguments": {}}}
    push = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Proceed?", "requestedSchema": SCHEMA},
    }
    result = {"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": "ok"}], "isError": False}}

    def answer(request_id: str) -> bytes:
        return orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": {"ok": True}}}
        )

    return line(call), line(push), lambda request_id: answer(request_id) + b"\n", line(result)


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


STAGES = ("the call", "the push", "the answer", "the result", "the loop turn after (its end recorded)")


def stage_medians(times: list[list[int]]) -> list[float]:
    return [statistics.median(stage) / 1000 for stage in times]


async def questions(work: QuestionWork, count: int, start: int, times: list[list[int]] | None = None) -> None:
    """`count` questions through `work`'s message handlers (fed as the relay's `Lines` feed them); with `times`,
    each stage's wall time in ns appended to its list."""
    to_client: list[bytes] = []
    work.to_client, work.to_server = to_client.append, lambda data: None
    client, server = Lines(work.from_client), Lines(work.from_server)
    client.feed(line(INITIALIZE))
    await _timed(
        client.feed, server.feed, lambda n: orjson.loads(to_client.pop())["id"], to_client, count, start, times
    )


async def lean_questions(count: int, start: int, times: list[list[int]] | None = None) -> None:
    """The same four lines through the lean relay's `Lines` (parsed, written again), and the same loop turn."""
    sink: list[bytes] = []
    client, server = lean_relay.Lines(sink.append), lean_relay.Lines(sink.append)
    await _timed(client.feed, server.feed, lambda n: f"eg-{n}", sink, count, start, times)


async def _timed(
    from_client: Callable[[bytes], None],
    from_server: Callable[[bytes], None],
    asked_id: Callable[[int], Any],
    written: list[bytes],
    count: int,
    start: int,
    times: list[list[int]] | None,
) -> None:
    """The four lines of `count` questions fed in turn, `asked_id(n)` the id the client answers; what was `written`
    cleared after each, and a loop turn given (the one in which the work records the end)."""
    for n in range(start, start + count):
        call, push, answer, result = messages(n)
        t0 = time.perf_counter_ns()
        from_client(call)
        t1 = time.perf_counter_ns()
        from_server(push)
        t2 = time.perf_counter_ns()
        answered = answer(asked_id(n))
        t3 = time.perf_counter_ns()
        from_client(answered)
        t4 = time.perf_counter_ns()
        from_server(result)
        t5 = time.perf_counter_ns()
        written.clear()
        await asyncio.sleep(0)  # the loop turn in which `_after_answer`'s callback records the end
        t6 = time.perf_counter_ns()
        if times is not None:
            for stage, took in enumerate((t1 - t0, t2 - t1, t4 - t3, t5 - t4, t6 - t5)):
                times[stage].append(took)


def calls_by_module(profile: cProfile.Profile, count: int) -> list[tuple[str, float]]:
    """Python and C calls per question by module (C functions under `~`), the driver's own and those it makes left
    out: what the relay's handlers and what they call do."""
    by_module: Counter[str] = Counter()
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # pyright: ignore[reportAttributeAccessIssue]
    for (filename, _, _), (*_counts, callers) in stats.items():
        if filename in DRIVER:
            continue
        by_module[module_of(filename)] += sum(c[1] for caller, c in callers.items() if caller[0] not in DRIVER)
    return [(module, calls / count) for module, calls in by_module.most_common()]


DRIVER = (__file__, asyncio.tasks.__file__)
"""This module, and `asyncio.sleep`'s frames (the driver's loop turn; cProfile counts every resumption)."""


def module_of(filename: str) -> str:
    for marker in ("/src/elicitgate/", "/bench/", "/site-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1].removesuffix(".py")
    return Path(filename).name if filename.startswith("/") else filename


async def measure(args: argparse.Namespace, audit_dir: Path) -> None:
    work, writer = await started_work("up", audit_dir, "bench.question_work")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    await questions(work, 200, 1)  # warm: the form's check built, the metrics' children made
    profile = cProfile.Profile()
    profile.enable()
    await questions(work, args.questions, 1_000_000)
    profile.disable()
    lean = cProfile.Profile()
    lean.enable()
    await lean_questions(args.questions, 1)
    lean.disable()
    work_calls, lean_calls = calls_by_module(profile, args.questions), calls_by_module(lean, args.questions)
    cpu_work = cpu_lean = float("inf")
    for round_ in range(args.repeat):
        begin = time.process_time()
        await questions(work, args.questions, 2_000_000 + round_ * args.questions)
        cpu_work = min(cpu_work, (time.process_time() - begin) / args.questions)
        begin = time.process_time()
        await lean_questions(args.questions, 1)
        cpu_lean = min(cpu_lean, (time.process_time() - begin) / args.questions)
    work_times: list[list[int]] = [[] for _ in STAGES]
    lean_times: list[list[int]] = [[] for _ in STAGES]
    await questions(work, args.questions, 3_000_000, work_times)
    await lean_questions(args.questions, 1, lean_times)
    await work.trail.close()
    await writer
    print(f"per question ({args.questions} questions; CPU the fastest of {args.repeat} rounds, every thread)")
    print()
    print("| | calls | CPU us |")
    print("|---|---:|---:|")
    print(f"| lean relay's lines (4 messages) | {sum(c for _, c in lean_calls):.1f} | {cpu_lean * 1e6:.1f} |")
    print(f"| lean relay + question work | {sum(c for _, c in work_calls):.1f} | {cpu_work * 1e6:.1f} |")
    print()
    print("lean relay + question work, calls per question by module (`~`: C functions):")
    print()
    print("| module | calls |")
    print("|---|---:|")
    for module, calls in work_calls:
        if calls >= 0.5:
            print(f"| {module} | {calls:.1f} |")
    print()
    print(f"by stage: median wall time per question of {args.questions} (us; the loop thread alone: no other work)")
    print()
    print("| stage | lean relay's lines | lean relay + question work | the work |")
    print("|---|---:|---:|---:|")
    lean_stages, work_stages = stage_medians(lean_times), stage_medians(work_times)
    for stage, lean_us, work_us in zip(STAGES, lean_stages, work_stages, strict=True):
        print(f"| {stage} | {lean_us:.1f} | {work_us:.1f} | {work_us - lean_us:+.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.question_work", description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="question-work-") as audit_dir:
        uvloop.run(measure(args, Path(audit_dir)))


if __name__ == "__main__":
    main()
