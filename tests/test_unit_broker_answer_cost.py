"""What an answer's way through the broker no longer pays for (issue #34), with the same results: an answer to a form
the broker keeps is checked by that form's plain check found by the shared schema itself (not by writing the schema's
JSON again, `JsonMemo`), and its end is noted for the admin API's last ends (`RecentEnds`) with its summary made
once the answer is on its way, found all along."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from types import CodeType
from typing import Any

import pytest
from mcp_types import INVALID_PARAMS

from mcp.shared.exceptions import MCPError

from elicitgate import metrics
from elicitgate.audit.record import AuditRecord
from elicitgate.audit.trail import AuditTrail
from elicitgate.config import AuditConfig, ElicitationConfig
from elicitgate.elicitation import form_schemas, recent
from elicitgate.elicitation.broker import Broker, _about  # pyright: ignore[reportPrivateUsage]
from elicitgate.elicitation.form_schemas import FormSchemas
from elicitgate.elicitation.meta import ERRORS_META_KEY
from elicitgate.elicitation.model import Elicitation, State
from elicitgate.elicitation.recent import RecentEnds
from elicitgate.elicitation.responders import PUSH_TO_CLIENT
from elicitgate.elicitation.schema import answer_problems
from tests.profiled import calls_of
from tests.test_unit_broker_end_cost import _Origin  # pyright: ignore[reportPrivateUsage]


def _form() -> dict[str, Any]:
    """A new copy each time, as each request's params are parsed anew."""
    return {
        "type": "object",
        "properties": {"ok": {"type": "boolean", "title": "Yes?"}, "n": {"type": "integer", "maximum": 3}},
        "required": ["ok"],
    }


def _asked(broker: Broker, schema: Any) -> Elicitation:
    params = {"message": "Proceed?", "requestedSchema": schema}
    checked = broker._check_request("unit-answercost", "form", params, True)  # pyright: ignore[reportPrivateUsage]
    assert checked is not None
    params["requestedSchema"] = checked.schema  # as `Broker._admitted` puts it
    el = Elicitation(
        server="unit-answercost",
        mode="form",
        params=params,
        deadline=0.0,
        origin=_Origin(),  # pyright: ignore[reportArgumentType]
        responder=PUSH_TO_CLIENT,
    )
    el.state, el.attempts = State.PRESENTED, 1
    metrics.pending_opened("unit-answercost")
    return el


def test_an_answer_to_a_kept_form_is_checked_without_writing_its_schema_again() -> None:
    broker = Broker(ElicitationConfig(max_answer_attempts=5))
    _asked(broker, _form())  # the form checked and kept at its first request
    for answer in ({"ok": True}, {"ok": False, "n": 2}):
        el = _asked(broker, _form())
        (result, done), called = calls_of(
            lambda el=el, answer=answer: broker._answered(el, {"action": "accept", "content": answer}),  # pyright: ignore[reportPrivateUsage]
            c_calls=True,
        )
        assert done and result == {"action": "accept", "content": answer} and el.state is State.ACCEPTED
        assert "dumps" not in called and "__call__" not in called
    # An answer that does not fit: asked again with the problems it had before.
    for wrong in ({"ok": "yes"}, {"n": 9}, {"ok": True, "other": 1}):
        el = _asked(broker, _form())
        retry, done = broker._answered(el, {"action": "accept", "content": wrong})  # pyright: ignore[reportPrivateUsage]
        assert not done and retry["_meta"][ERRORS_META_KEY] == answer_problems(_form(), wrong)


def test_a_forms_plain_check_is_kept_with_the_form_and_forgotten_with_it() -> None:
    schemas = FormSchemas(max_properties=20)
    first = schemas.check(_form(), max_bytes=65536)
    assert schemas.check(_form(), max_bytes=65536) is first
    kept = schemas.plain_checks[id(first.schema)]
    assert kept[0] is first.schema and kept[1] is not None and kept[1]({"ok": True}) and not kept[1]({"ok": 1})
    invalid = schemas.check({"type": "object", "properties": {"x": {"type": "object"}}}, max_bytes=65536)
    assert invalid.problems and id(invalid.schema) not in schemas.plain_checks  # an invalid form is never asked
    for i in range(form_schemas.KEPT_SCHEMAS):  # the first two forgotten, the oldest first
        schemas.check({"type": "object", "properties": {f"f{i}": {"type": "string"}}}, max_bytes=65536)
    assert id(first.schema) not in schemas.plain_checks
    assert len(schemas.plain_checks) == len(schemas) == form_schemas.KEPT_SCHEMAS


def test_an_answer_to_a_form_no_longer_kept_is_checked_as_before() -> None:
    broker = Broker(ElicitationConfig(max_answer_attempts=5))
    el = _asked(broker, _form())
    broker.form_schemas.plain_checks.clear()  # forgotten while its question was pending
    result, done = broker._answered(el, {"action": "accept", "content": {"ok": "no"}})  # pyright: ignore[reportPrivateUsage]
    assert not done and result["_meta"][ERRORS_META_KEY] == answer_problems(_form(), {"ok": "no"})
    result, done = broker._answered(el, {"action": "accept", "content": {"ok": True}})  # pyright: ignore[reportPrivateUsage]
    assert done and result == {"action": "accept", "content": {"ok": True}}


def test_an_end_is_found_by_the_admin_api_before_and_after_its_summary_is_put_in_its_slot() -> None:
    broker = Broker(ElicitationConfig())
    el = _asked(broker, _form())
    _, called = calls_of(lambda: broker._answered(el, {"action": "accept", "content": {"ok": True}}))  # pyright: ignore[reportPrivateUsage]
    assert "summary_row" not in called  # on the answer's way: noted only
    assert broker.recent.find(el.id) == el.summary() and list(broker.recent) == [el.summary()]
    contextvars.Context().run(broker._recorded, el, None)  # pyright: ignore[reportPrivateUsage]
    assert broker.recent.find(el.id) == el.summary() and len(broker.recent) == 1


def test_ends_noted_are_settled_in_order_and_never_held_past_the_bound() -> None:
    bound = getattr(recent, "UNSETTLED", 16)
    ends = RecentEnds(size=5)
    els: list[Elicitation] = []
    for n in range(bound * 2 + 3):
        el = Elicitation(server="s", mode="form", params={}, deadline=0.0)
        el.state, el.reason, el.ended_at = State.DECLINED, f"r{n}", el.created_at + n
        els.append(el)
        ends.add(el)
        assert len(ends._unsettled) < bound  # pyright: ignore[reportPrivateUsage]
    assert list(ends) == [el.summary() for el in els[-5:]]
    assert [ends[i]["reason"] for i in range(-5, 0)] == [f"r{n}" for n in range(len(els) - 5, len(els))]


class _Clock:
    """A call's request clock (`PausableDeadline`): when it was paused and resumed."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bool]] = []
        self.task: asyncio.Task[object] | None = None

    def pause(self) -> None:
        self.events.append(("pause", self.task is not None and self.task.done()))

    def resume(self) -> None:
        self.events.append(("resume", self.task is not None and self.task.done()))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("own_task", [True, False])
async def test_the_request_clocks_run_again_once_the_answer_is_on_its_way(anyio_backend: str, own_task: bool) -> None:
    """The clocks a question stops (the upstream call's deadline) run again after the task that answers the upstream
    is done (a server's push: the endpoint wrote the answer in it), or a callback later, not on the answer's way; each
    paused and resumed once all the same, whatever way the question ends."""
    broker = Broker(ElicitationConfig())
    for answer in ({"action": "accept", "content": {"ok": True}}, {"action": "decline"}, {"action": "nonsense"}):
        origin = _Origin(answer=asyncio.get_running_loop().create_future())
        clocks = [_Clock(), _Clock()]

        async def asked(clocks: list[_Clock] = clocks, origin: _Origin = origin) -> object:
            params = {"message": "Proceed?", "requestedSchema": _form()}
            return await broker.elicit(
                server="unit-answercost",
                origin=origin,  # pyright: ignore[reportArgumentType]
                params=params,
                clocks=clocks,  # pyright: ignore[reportArgumentType]
                own_task=own_task,
            )

        task = asyncio.get_running_loop().create_task(asked())
        for clock in clocks:
            clock.task = task
        while not origin.requests:
            await asyncio.sleep(0)
        assert [clock.events for clock in clocks] == [[("pause", False)]] * 2
        assert origin.answer is not None
        origin.answer.set_result(answer)
        with contextlib.suppress(MCPError):
            await task
        for _ in range(3):
            if all(len(clock.events) == 2 for clock in clocks):
                break
            await asyncio.sleep(0)
        assert [clock.events for clock in clocks] == [[("pause", False), ("resume", True)]] * 2
        assert not broker.pending


def test_a_push_is_asked_of_its_origin_without_a_call_around_it() -> None:
    origin = _Origin(answer=None)
    el = Elicitation(server="s", mode="form", params={}, deadline=0.0, origin=origin)  # pyright: ignore[reportArgumentType]
    origin.answer = asyncio.Future(loop=asyncio.new_event_loop())
    asked, called = calls_of(lambda: PUSH_TO_CLIENT.ask(el, {"message": "m"}))
    assert asked is origin.answer and origin.requests == [{"message": "m"}]
    assert called == ["ask", "send_request"]
    asked._loop.close()  # pyright: ignore[reportAttributeAccessIssue,reportUnknownMemberType]


def test_a_request_is_checked_without_a_function_made_for_it() -> None:
    """Its refusals are made by one function (`_refusal`), not by a closure made for each request checked."""
    code = Broker._check_request.__code__  # pyright: ignore[reportPrivateUsage]
    made = [const.co_name for const in code.co_consts if isinstance(const, CodeType)]
    assert made == ["<listcomp>"]  # a refusal's list of problems, on its way only
    broker = Broker(ElicitationConfig())
    with pytest.raises(MCPError) as refused:
        broker._check_request("s", "form", {"message": 3}, True)  # pyright: ignore[reportPrivateUsage]
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.message == "elicitation/create needs a string message"


def test_an_ascii_message_is_measured_without_a_copy_and_every_message_as_before() -> None:
    broker = Broker(ElicitationConfig(max_message_bytes=8))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    _, called = calls_of(
        lambda: broker._check_request("s", "form", {"message": "12345678", "requestedSchema": schema}, True),  # pyright: ignore[reportPrivateUsage]
        c_calls=True,
    )
    assert "encode" not in called
    for message, fits in (("123456789", False), ("ééé", True), ("éééé", True), ("ééééé", False), ("€€€", False)):
        if fits:
            broker._check_request("s", "form", {"message": message, "requestedSchema": schema}, True)  # pyright: ignore[reportPrivateUsage]
            continue
        with pytest.raises(MCPError) as refused:
            broker._check_request("s", "form", {"message": message, "requestedSchema": schema}, True)  # pyright: ignore[reportPrivateUsage]
        assert refused.value.error.message == "elicitation message too long"


def test_an_ends_record_names_its_origin_without_a_dict_of_it_made_first() -> None:
    """`_about(origin)`'s fields given to the audit record as they are: the same record."""
    broker = Broker(ElicitationConfig(), audit=AuditTrail(AuditConfig(url="sqlite:///unused.db")))
    el = _asked(broker, _form())
    assert el.origin is not None
    el.origin.peer.principal = "alice"
    broker._answered(el, {"action": "accept", "content": {"ok": True}})  # pyright: ignore[reportPrivateUsage]
    _, called = calls_of(lambda: contextvars.Context().run(broker._recorded, el, None))  # pyright: ignore[reportPrivateUsage]
    assert "_about" not in called
    assert broker.audit is not None
    record = broker.audit._queue.popleft()  # pyright: ignore[reportPrivateUsage]
    assert (record.client, record.client_id, record.principal, record.request_id, record.tool) == (
        "unit",
        "c1",
        "alice",
        "7",
        "demo__confirm",
    )
    assert record == AuditRecord(
        id=el.id,
        server=el.server,
        mode="form",
        state="accepted",
        reason="user accepted",
        created_at=record.created_at,
        ended_at=record.ended_at,
        attempts=1,
        responder="client",
        **_about(el.origin),  # pyright: ignore[reportPrivateUsage]
    )


def test_an_end_told_to_its_responder_only_when_it_keeps_something() -> None:
    """The client's own responders (a push, a round) keep nothing per question: their `ended` is not called; any
    other is told, once."""
    broker = Broker(ElicitationConfig())
    el = _asked(broker, _form())
    _, called = calls_of(lambda: broker._answered(el, {"action": "decline"}))  # pyright: ignore[reportPrivateUsage]
    assert el.state is State.DECLINED and "ended" not in called

    class Keeping:
        name, cancel_on_timeout = "hosted_page", True
        told: list[str] = []

        def ended(self, el: Elicitation) -> None:
            self.told.append(el.id)

    kept = _asked(broker, _form())
    kept.responder = Keeping()  # pyright: ignore[reportAttributeAccessIssue]
    broker._answered(kept, {"action": "cancel"})  # pyright: ignore[reportPrivateUsage]
    broker._end(kept, State.FAILED, "again")  # pyright: ignore[reportPrivateUsage]
    assert Keeping.told == [kept.id] and kept.state is State.CANCELLED
