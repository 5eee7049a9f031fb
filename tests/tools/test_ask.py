"""``ask_user``: the form schema checked before anything reaches the editor, the
elicitation request as the schema defines it, each answer as the tool's result, and the
capability gates (the tool is offered, and ``elicitation/create`` sent, only with form
mode)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from acp_agent.client import ClientProxy, elicitation_modes
from acp_agent.engine.subagents import SpawnAgentArgs
from acp_agent.errors import MethodNotFound, RemoteError, ToolError
from acp_agent.protocol import types as t
from acp_agent.tools.ask import AskUser
from acp_agent.tools.base import json_schema

from ..schema_check import validate_def
from .fake_client import FakeClient, wire

FORM = t.ClientCapabilities(
    elicitation=t.ElicitationCapabilities(form=t.ElicitationFormCapabilities())
)

Answer = dict[str, Any] | BaseException | asyncio.Event


class AskingClient(FakeClient):
    """A fake editor that answers ``elicitation/create`` from a list: a response object,
    an exception to raise, or an event to wait on forever (a question left open)."""

    def __init__(self, *answers: Answer, caps: t.ClientCapabilities = FORM) -> None:
        super().__init__()
        self.capabilities = caps
        self.answers = list(answers)
        self.cancelled = 0
        self.asked = asyncio.Event()

    def allows(self, method: str) -> bool:
        if method.startswith("elicitation/"):
            return bool(elicitation_modes(self.capabilities))
        return super().allows(method)

    async def call(self, method: str, params: Any, result_type: Any) -> Any:
        if method != "elicitation/create":
            return await super().call(method, params, result_type)
        assert "form" in elicitation_modes(self.capabilities), "form mode was not advertised"
        self.events.append(("call", (method, params)))
        self.asked.set()
        errors = validate_def("CreateElicitationRequest", wire(params))
        assert not errors, errors
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, asyncio.Event):
            try:
                await answer.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        assert not validate_def("CreateElicitationResponse", answer)
        return msgspec.json.decode(msgspec.json.encode(answer), type=result_type)


@pytest.fixture
async def closing() -> AsyncIterator[list[FakeClient]]:
    clients: list[FakeClient] = []
    yield clients
    for client in clients:
        await client.close()


STRATEGY: dict[str, Any] = {
    "title": "Refactoring",
    "properties": {
        "strategy": {"type": "string", "title": "Strategy", "enum": ["safe", "bold"],
                     "default": "safe"},
        "files": {"type": "array", "title": "Files",
                  "items": {"anyOf": [{"const": "a.py", "title": "a.py"},
                                      {"const": "b.py", "title": "b.py"}]},
                  "minItems": 1},
        "depth": {"type": "integer", "minimum": 1, "maximum": 3},
        "tests": {"type": "boolean", "title": "Run tests"},
    },
    "required": ["strategy"],
}


async def ask(client: AskingClient, ws: Path, schema: Any, message: str = "How?") -> Any:
    tool = AskUser()
    args = tool.parse({"message": message, "schema": schema})
    ctx = client.context(str(ws))
    info = tool.describe(args, ctx)
    assert info.access == "none" and info.title.startswith("Ask the user")
    return await tool.run(args, ctx)


# ---------------------------------------------------------------------- answers


async def test_accept_is_the_result(ws: Path, closing: list[FakeClient]) -> None:
    """The request: form mode, the session and tool call, the checked schema; the
    accepted values are the model's result, shown to the user by their titles."""
    client = AskingClient({"action": "accept", "content": {
        "strategy": "bold", "files": ["b.py"], "depth": 2.0, "tests": True}})
    closing.append(client)
    out = await ask(client, ws, STRATEGY, "How should I refactor?")
    [(method, params)] = client.calls
    sent = wire(params)
    assert method == "elicitation/create"
    assert sent["mode"] == "form" and sent["message"] == "How should I refactor?"
    assert sent["sessionId"] == "sess-1" and sent["toolCallId"] == "call-1"
    schema = sent["requestedSchema"]
    assert schema["type"] == "object" and schema["title"] == "Refactoring"
    assert schema["required"] == ["strategy"]
    assert schema["properties"]["files"]["items"] == STRATEGY["properties"]["files"]["items"]
    assert json.loads(out.text.split("\n", 1)[1]) == {
        "strategy": "bold", "files": ["b.py"], "depth": 2, "tests": True}
    assert out.raw_output["action"] == "accept"
    shown = out.content[0].content.text
    assert "**Strategy**: bold" in shown and "**Files**: b.py" in shown
    assert "**depth**: 2" in shown and "**Run tests**: yes" in shown


@pytest.mark.parametrize(("answer", "said"), [
    ({"action": "decline"}, "declined"),
    ({"action": "cancel"}, "dismissed"),
    ({"action": "accept"}, "without filling in"),
    ({"action": "decline", "content": {"ignored": 1}}, "declined"),
])
async def test_decline_cancel_and_empty(ws: Path, closing: list[FakeClient], answer: dict[str, Any],
                                        said: str) -> None:
    client = AskingClient(answer)
    closing.append(client)
    out = await ask(client, ws, {"properties": {"name": {"type": "string"}}})
    assert said in out.text
    assert out.raw_output["action"] == answer["action"]


@pytest.mark.parametrize(("answer", "said"), [
    ({"action": "_later"}, "action this agent does not know ('_later')"),
    ({"action": "accept", "content": {"strategy": "wild"}}, "'strategy' is 'wild', not one of"),
    ({"action": "accept", "content": {"files": ["a.py"]}}, "'strategy' is missing"),
    ({"action": "accept", "content": {"strategy": "safe", "depth": 7}}, "above the maximum 3"),
    ({"action": "accept", "content": {"strategy": "safe", "depth": 1.5}}, "not an integer"),
    ({"action": "accept", "content": {"strategy": "safe", "files": []}}, "fewer than 1"),
    ({"action": "accept", "content": {"strategy": "safe", "color": "red"}},
     "'color' was not asked"),
    ({"action": "accept", "content": {"strategy": "safe", "tests": "yes"}}, "not true or false"),
])
async def test_answers_that_do_not_fit(ws: Path, closing: list[FakeClient], answer: dict[str, Any],
                                       said: str) -> None:
    """An unknown action is not treated as a known one; values are checked again."""
    client = AskingClient(answer)
    closing.append(client)
    with pytest.raises(ToolError) as err:
        await ask(client, ws, STRATEGY)
    assert said in err.value.message


async def test_an_editor_error_is_the_models(ws: Path, closing: list[FakeClient]) -> None:
    client = AskingClient(RemoteError(-32602, "Invalid params: unsupported mode"))
    closing.append(client)
    with pytest.raises(ToolError) as err:
        await ask(client, ws, STRATEGY)
    assert "could not show the question (Invalid params: unsupported mode)" in err.value.message
    assert "Ask in your answer" in err.value.message


async def test_a_cancel_abandons_the_question(ws: Path, closing: list[FakeClient]) -> None:
    """Cancelling the tool's task cancels the pending request (the connection sends
    ``$/cancel_request`` for it: see test_elicitation)."""
    open_question = asyncio.Event()
    client = AskingClient(open_question)
    closing.append(client)
    task = asyncio.create_task(ask(client, ws, STRATEGY))
    await client.asked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.cancelled == 1


# ---------------------------------------------------------------------- the question


@pytest.mark.parametrize(("schema", "said"), [
    ({}, "at schema.properties: must be an object with at least one field"),
    ({"properties": {}}, "at least one field"),
    ({"properties": {"x": {"type": "string"}}, "additionalProperties": False},
     "unknown key(s) 'additionalProperties'"),
    ({"type": "array", "properties": {"x": {"type": "string"}}}, 'schema.type: must be "object"'),
    ({"properties": {"x": {"type": "object", "properties": {}}}},
     "schema.properties.x.type: 'object' is not a field type; forms are flat"),
    ({"properties": {"x": {"type": "date"}}}, "'date' is not a field type"),
    ({"properties": {"x": "string"}}, 'a field is an object such as {"type": "string"}'),
    ({"properties": {"x": {"type": "string", "items": {}}}},
     "unknown key(s) 'items' for a string field"),
    ({"properties": {"x": {"type": "string", "enum": []}}}, "x.enum: must be a non-empty list"),
    ({"properties": {"x": {"type": "string", "enum": ["a", 1]}}}, "non-empty strings"),
    ({"properties": {"x": {"type": "string", "enum": ["a", "a"]}}}, "a choice appears twice"),
    ({"properties": {"x": {"type": "string", "enum": ["a"], "oneOf": []}}}, "not both"),
    ({"properties": {"x": {"type": "string", "oneOf": [{"const": "a"}]}}},
     "x.oneOf[0].title: must be a non-empty string"),
    ({"properties": {"x": {"type": "string", "enum": ["a", "b"], "default": "c"}}},
     "x.default: is 'c', not one of 'a', 'b'"),
    ({"properties": {"x": {"type": "string", "minLength": 5, "maxLength": 2}}},
     "minLength (5) is greater than maxLength (2)"),
    ({"properties": {"x": {"type": "string", "minLength": -1}}}, "0 or more"),
    ({"properties": {"x": {"type": "string", "pattern": "(["}}}, "not a valid regular expression"),
    ({"properties": {"x": {"type": "string", "format": "phone"}}}, "'phone' is not one of"),
    ({"properties": {"x": {"type": "integer", "minimum": 1.5}}}, "a whole number"),
    ({"properties": {"x": {"type": "number", "maximum": "ten"}}}, "x.maximum: must be a number"),
    ({"properties": {"x": {"type": "number", "minimum": 0, "default": -1}}}, "below the minimum 0"),
    ({"properties": {"x": {"type": "boolean", "default": "no"}}}, "true or false"),
    ({"properties": {"x": {"type": "array"}}}, "an array field is a multiple choice"),
    ({"properties": {"x": {"type": "array", "items": {"type": "number"}}}},
     "the options of a multiple choice are strings"),
    ({"properties": {"x": {"type": "array", "items": {"type": "string"}}}},
     "exactly one of them"),
    ({"properties": {"x": {"type": "array", "items": {"enum": ["a"]}, "minItems": 2}}},
     "2 is more than the 1 options"),
    ({"properties": {"x": {"type": "array", "items": {"enum": ["a"]}, "default": ["b"]}}},
     "x.default: has 'b', not among 'a'"),
    ({"properties": {"x": {"type": "string"}}, "required": ["y"]},
     "schema.required: 'y' is not one of the fields"),
    ({"properties": {"x": {"type": "string", "title": 3}}}, "x.title: must be a string"),
    ({"properties": {f"f{i}": {"type": "boolean"} for i in range(21)}}, "ask at most 20"),
])
async def test_invalid_schemas_are_clear_tool_errors(ws: Path, closing: list[FakeClient],
                                                     schema: Any, said: str) -> None:
    """Whatever ElicitationSchema does not allow is refused, naming the field; nothing
    reaches the editor."""
    client = AskingClient()
    closing.append(client)
    with pytest.raises(ToolError) as err:
        await ask(client, ws, schema)
    assert said in err.value.message, err.value.message
    assert err.value.message.startswith("Invalid form schema at")
    assert client.calls == []


@pytest.mark.parametrize(("schema", "message"), [
    ({"properties": {"password": {"type": "string"}}}, "Log in"),
    ({"properties": {"key": {"type": "string", "title": "OpenAI API key"}}}, "Set up"),
    ({"properties": {"accessToken": {"type": "string"}}}, "Connect"),
    ({"properties": {"name": {"type": "string"}}}, "What is your credit card number?"),
])
async def test_secrets_are_never_asked_in_a_form(ws: Path, closing: list[FakeClient],
                                                 schema: Any, message: str) -> None:
    client = AskingClient()
    closing.append(client)
    with pytest.raises(ToolError) as err:
        await ask(client, ws, schema, message)
    assert "must not ask for secrets" in err.value.message
    assert client.calls == []


def test_arguments_are_parsed_strictly() -> None:
    tool = AskUser()
    with pytest.raises(ToolError) as err:
        tool.parse({"message": "Hm?"})
    assert "schema" in err.value.message and "ask_user takes: message, schema." in err.value.message
    with pytest.raises(ToolError):
        tool.parse({"message": "", "schema": {"properties": {}}})


def test_the_models_view_of_the_tool() -> None:
    """The parameter schema describes a form (field names such as "title" survive the
    cleaning of msgspec's titles, in spawn_agent's arguments too)."""
    params = AskUser().spec.parameters
    assert params["required"] == ["message", "schema"]
    form = params["properties"]["schema"]
    assert form["required"] == ["properties"]
    field = form["properties"]["properties"]["additionalProperties"]
    kinds = ["string", "number", "integer", "boolean", "array"]
    assert field["properties"]["type"]["enum"] == kinds
    assert {"title", "description", "enum", "oneOf", "items", "default"} <= set(field["properties"])
    assert "$ref" not in json.dumps(params) and "discriminator" not in json.dumps(params)
    jsonschema.Draft202012Validator.check_schema(params)  # what the vendors validate it as
    spawn = json_schema(SpawnAgentArgs)
    assert set(spawn["required"]) == set(spawn["properties"]) == {"title", "description", "prompt"}


# ---------------------------------------------------------------------- capability gates


@pytest.mark.parametrize(("elicitation", "modes"), [
    (None, set()),
    ({}, set()),
    ({"form": None, "url": None}, set()),
    ({"form": {}}, {"form"}),
    ({"url": {}}, {"url"}),
    ({"form": {}, "url": {"_meta": {"x": 1}}}, {"form", "url"}),
])
def test_elicitation_modes(elicitation: Any, modes: set[str]) -> None:
    """``elicitation: {}`` advertises no mode; each mode only when present and non-null."""
    raw = {} if elicitation is None else {"elicitation": elicitation}
    caps = msgspec.convert(raw, t.ClientCapabilities)
    assert elicitation_modes(caps) == modes


class _Connection:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any, result_type: Any, **kw: Any) -> Any:
        self.sent.append((method, params))
        return {"action": "decline"}


@pytest.mark.parametrize(("elicitation", "allowed"), [
    (None, False), ({}, False), ({"url": {}}, False), ({"form": {}}, True),
])
async def test_the_proxy_sends_form_requests_only_with_form_mode(elicitation: Any,
                                                                 allowed: bool) -> None:
    connection = _Connection()
    proxy = ClientProxy(connection)  # type: ignore[arg-type]
    raw = {} if elicitation is None else {"elicitation": elicitation}
    proxy.capabilities = msgspec.convert(raw, t.ClientCapabilities)
    request = t.ElicitationFormMode(message="?", requested_schema=t.ElicitationSchema(),
                                    session_id="s")
    if allowed:
        assert await proxy.call("elicitation/create", request, dict) == {"action": "decline"}
        assert [m for m, _ in connection.sent] == ["elicitation/create"]
    else:
        with pytest.raises(MethodNotFound):
            await proxy.call("elicitation/create", request, dict)
        assert connection.sent == []
    assert proxy.allows("elicitation/complete") == (elicitation == {"url": {}})
