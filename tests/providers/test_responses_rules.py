"""The fake Responses API refuses what api.openai.com refuses (a fake is only as honest as
the rules it enforces): each rule against a request that breaks it, and the requests the
provider builds pass them all."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ..fakes.llm_responses import ResponsesState, check
from ..fakes.llm_wire import Finish, Reasoning, Step, ToolCall, responses_events

TOOLS = [{"type": "function", "name": "read_file", "parameters": {"type": "object"},
          "strict": False}]  # fmt: skip
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}


def issued(state: ResponsesState) -> tuple[str, str, str]:
    """Run one answer (reasoning, then a call) so the state knows its items: the reasoning
    id, its encrypted content, and the id of the call that followed it."""
    steps: list[Step] = [
        Reasoning(("why",)), ToolCall("call_1", "read_file", "{}"), Finish("tool_calls")]
    responses_events(steps, "gpt-5", state.issuer({"include": ["reasoning.encrypted_content"]}))
    ((sealed, rs_id),) = state.sealed.items()
    return rs_id, sealed, state.follower[rs_id]


def body(*items: dict[str, Any], **params: Any) -> dict[str, Any]:
    base = {"model": "gpt-5", "input": list(items), "stream": True, "store": False,
            "tools": TOOLS}  # fmt: skip
    return {**base, **params}


def call(**extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}",
            **extra}  # fmt: skip


OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "r"}


def refused(request: dict[str, Any], state: ResponsesState) -> tuple[int, str]:
    answer = check(request, state)
    assert answer is not None, "the fake took a request the API refuses"
    status, error = answer
    return status, error["error"]["message"]


def test_a_stateless_round_trip_is_taken() -> None:
    """What the provider sends back: reasoning without id, with its encrypted content, right
    before its call, the call's output after."""
    state = ResponsesState()
    _, sealed, _ = issued(state)
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": sealed}
    assert check(body(USER, reasoning, call(), OUTPUT), state) is None


@pytest.mark.parametrize(
    ("change", "status", "message"),
    [
        (lambda b, s: b.update(messages=[]), 400, "Unknown parameter: 'messages'"),
        (lambda b, s: b.update(max_output_tokens=8), 400, "Expected a value >= 16"),
        (
            lambda b, s: b.update(model="gpt-4.1", reasoning={"effort": "low"}),
            400,
            "'reasoning.effort' is not supported with this model",
        ),
        (
            lambda b, s: b.update(model="gpt-4.1", include=["reasoning.encrypted_content"]),
            400,
            "Encrypted content is not supported with this model",
        ),
        (
            lambda b, s: b.update(tools=[{"type": "function", "function": {"name": "f"}}]),
            400,
            "Missing required parameter: 'tools[0].name'",
        ),
        (lambda b, s: b.update(tools=[{**TOOLS[0], "strict": True}]), 400, "Invalid schema"),
        (lambda b, s: b.update(previous_response_id="resp_1"), 404, "not found"),
        (
            lambda b, s: b.update(input=[USER, call()]),
            400,
            "No tool output found for function call call_1",
        ),
        (
            lambda b, s: b.update(input=[USER, OUTPUT]),
            400,
            "No tool call found for function call output with call_id call_1",
        ),
        (lambda b, s: b.pop("tools"), 400, "require `tools`"),
        (
            lambda b, s: b.update(input=[{"type": "item_reference", "id": "msg_1"}]),
            404,
            "not found",
        ),
        (
            lambda b, s: b.update(
                input=[{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]
            ),
            400,
            "Invalid value: 'input_text'",
        ),
        (lambda b, s: b.update(input=[{"type": "web_search_call"}]), 400, "Invalid value"),
    ],
)
def test_requests_the_api_refuses(change: Any, status: int, message: str) -> None:
    state = ResponsesState()
    request = body(USER, call(), OUTPUT)
    change(request, state)
    got_status, got = refused(request, state)
    assert got_status == status and message in got


def test_reasoning_items_the_api_refuses() -> None:
    state = ResponsesState()
    rs_id, sealed, fc_id = issued(state)
    good = {"type": "reasoning", "summary": [], "encrypted_content": sealed}
    cases: list[tuple[list[dict[str, Any]], int, str]] = [
        # by id alone, with nothing stored
        ([USER, {"type": "reasoning", "id": rs_id, "summary": []}, call(), OUTPUT], 404,
         f"Item with id '{rs_id}' not found. Items are not persisted when `store` is set to false"),
        # content this server never issued
        ([USER, {**good, "encrypted_content": "gAAAAforged"}, call(), OUTPUT], 400,
         "could not be verified"),
        # no summary
        ([USER, {"type": "reasoning", "encrypted_content": sealed}, call(), OUTPUT], 400,
         "Missing required parameter: 'input[1].summary'"),
        # nothing of its answer after it
        ([USER, call(), OUTPUT, good], 400, "was provided without its required following item"),
        ([USER, good, USER], 400, "was provided without its required following item"),
        # with its id, but not before the item that followed it
        ([USER, {**good, "id": rs_id}, call(), OUTPUT], 400, "without its required following item"),
        # the call that followed a reasoning item, by its id, without it
        ([USER, call(id=fc_id), OUTPUT], 400,
         f"Item '{fc_id}' of type 'function_call' was provided without its required 'reasoning' "
         f"item: '{rs_id}'"),
    ]  # fmt: skip
    for items, status, message in cases:
        got_status, got = refused(body(*copy.deepcopy(items)), state)
        assert (got_status, message in got) == (status, True), (items, got)
    assert check(body(USER, {**good, "id": rs_id}, call(id=fc_id), OUTPUT), state) is None


def test_encrypted_reasoning_only_when_asked_for() -> None:
    """Without ``include``, reasoning items come without encrypted content (nothing to send
    back statelessly)."""
    state = ResponsesState()
    events = responses_events([Reasoning(("x",)), Finish("stop")], "o3", state.issuer({}))
    assert state.sealed == {} and not any(b"encrypted_content" in e for e in events)
