"""The `@modelcontextprotocol/conformance` server suite, run against tests/conformance/server.py directly
and through elicitgate (HTTP upstream, stdio upstream), and against a TypeScript SDK server in its
examples' style (asking on the standalone GET stream) directly and through elicitgate with default
settings, must give every scenario the same verdict, and the elicitation scenarios must pass through
the gateway. See docs/conformance.md.

Real processes throughout: the suite (Node 22 from npm), the server, `elicitgate serve --http`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.run import COMPARED, ELICITATION_SCENARIOS, compare, with_references
from tests.conformance.suite import installed, scenarios

pytestmark = [pytest.mark.anyio, pytest.mark.node]


@pytest.mark.timeout(480)
async def test_every_scenario_has_the_same_verdict_through_the_gateway(tmp_path: Path) -> None:
    reason = installed()
    if reason:
        pytest.fail(reason)
    targets = with_references(list(COMPARED))
    outcome = await compare(targets, tmp_path)
    report = outcome.report()
    listed = await scenarios()
    for target in targets:
        missing = sorted(set(listed) - set(outcome.checks[target]))
        assert not missing, f"{target} ran no checks for {missing}\n{report}"
    assert outcome.failures() == [], report
    for target in COMPARED:
        assert {s: outcome.verdict(target, s) for s in ELICITATION_SCENARIOS} == dict.fromkeys(
            ELICITATION_SCENARIOS, "pass"
        ), report
