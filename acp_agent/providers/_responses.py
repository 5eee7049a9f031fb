"""OpenAI reasoning models through the Responses API (``POST /v1/responses``), streamed with
the official ``openai`` SDK's raw response and decoded with msgspec (``_wire.REvent``).

Why this API for o-series and GPT-5 models: their reasoning survives tool calls. Each answer
may carry reasoning items; the provider asks for them encrypted
(``include=["reasoning.encrypted_content"]``, ``store=false``: nothing is kept on OpenAI's
side), yields each as a :class:`ReasoningItem` that the turn keeps in history as a
:class:`ReasoningPart`, and sends it back, in order, with the function calls and outputs of
the conversation. Items are sent without their ids: the encrypted content is the state, and
an id would make the server look for a stored item (or pair it with the id of the item that
followed it). A reasoning item is sent only when an output item of its answer (a message or a
call) follows it, and only to the model that produced it. Reasoning summaries stream as
thoughts; ``reasoning.effort`` comes from the thinking level.

A tool with a grammar (``ToolSpec.grammar``: ``apply_patch``) is offered to a GPT-5 or
codex model at OpenAI as a custom tool, whose input is free text held to that grammar:
its call arrives as a ``custom_tool_call`` (the text becomes the call's one argument) and
goes back as one, with a ``custom_tool_call_output``. Elsewhere it is a function. At
OpenAI the session's id goes as ``prompt_cache_key``: requests that grow one
conversation reach the servers holding its cached prefix.

Everything around the stream (client, key, base URL, limits discovery, errors) is
:class:`OpenAIProvider`'s.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ..errors import ProviderStreamError
from ._openai import OpenAIProvider
from ._sdk import Posted, body_of, parse_tool_arguments, relay
from ._wire import EventStream, REvent, RResponse, RUsage, responses_event
from .base import (
    Finished,
    FinishReason,
    ModelRequest,
    ReasoningItem,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)
from .history import encoded
from .models import is_reasoning_model, takes_custom_tools

if TYPE_CHECKING:
    from openai import AsyncOpenAI

MIN_OUTPUT_TOKENS = 16  # the API's minimum for max_output_tokens
#: The argument a custom tool call's text becomes (``apply_patch``'s ``input``).
CUSTOM_INPUT = "input"


class ResponsesProvider(OpenAIProvider):
    """An OpenAI model through ``/v1/responses`` (chosen by :func:`.openai.build_compatible`)."""

    def custom_tools(self, request: ModelRequest) -> set[str]:
        """The tools offered as custom tools (see the module's docstring)."""
        if not (self._official and takes_custom_tools(self.model)):
            return set()
        return {t.name for t in request.tools if t.grammar}

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        custom = self.custom_tools(request)
        items = to_responses_input(request, self.name, custom)
        return self._responses_params(request, items, custom)

    def request_body(self, request: ModelRequest) -> bytes:
        if not request.tools:  # the functions its calls name are declared: rare, whole
            return _encode(body_of(self.request_params(request)))
        source, custom = self.name, self.custom_tools(request)
        key = f"responses:{source}:{','.join(sorted(custom))}"
        history = encoded(request.history_cache, key, request.messages,
                          lambda messages: responses_items(messages, source, custom),
                          _any)  # fmt: skip
        items = msgspec.Raw(history.array())
        return _encode(body_of(self._responses_params(request, items, custom)))

    def _responses_params(
        self, request: ModelRequest, items: Any, custom: set[str]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "input": items,
            "stream": True,
            "store": False,
        }
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = [
                _custom(t.name, t.description, t.grammar or "") if t.name in custom
                else _function(t.name, t.description, t.parameters)
                for t in request.tools
            ]  # fmt: skip
        elif called := sorted({i["name"] for i in items if i.get("type") == "function_call"}):
            # History with calls but nothing to offer (a compaction summary): the API wants
            # the functions declared; they are, and the model may not call them.
            params["tools"] = [_function(n, "Not available now.", _ANY_OBJECT) for n in called]
            params["tool_choice"] = "none"
        if request.max_tokens is not None:
            params["max_output_tokens"] = max(MIN_OUTPUT_TOKENS, request.max_tokens)
        if is_reasoning_model(self.model):
            params["include"] = ["reasoning.encrypted_content"]
        if request.thinking != "off":
            params["reasoning"] = {"effort": request.thinking, "summary": "auto"}
        if request.cache_key and self._official:
            params["prompt_cache_key"] = request.cache_key
        return params

    REHEARSAL_BODY = (
        b'data: {"type":"response.output_text.delta","delta":"ok"}\n\n'
        b'data: {"type":"response.completed","response":{"status":"completed",'
        b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    )

    def _stream(self, request: ModelRequest, client: AsyncOpenAI) -> AsyncIterator[StreamEvent]:
        async def open_stream() -> EventStream[REvent]:
            raw = Posted(client, "/responses", self.request_body(request))
            return await EventStream(raw, REvent, responses_event).open()

        return relay(open_stream, _ResponsesAssembler(self.name), self.origin)


_ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _custom(name: str, description: str, grammar: str) -> dict[str, Any]:
    return {
        "type": "custom",
        "name": name,
        "description": description,
        "format": {"type": "grammar", "syntax": "lark", "definition": grammar},
    }


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    # strict=False: the API's strict mode wants every property required and no others
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters,
        "strict": False,
    }


# --------------------------------------------------------------------------- stream assembly


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class _ResponsesAssembler:
    """Turns Responses stream events into :data:`StreamEvent` values: text and summary deltas
    as they come, each reasoning item and each call when its item is done."""

    def __init__(self, source: str) -> None:
        self.started = False
        self.source = source
        self.calls: dict[str, _Call] = {}  # open function calls by item id
        self.called = False
        self.refused = False
        self.summary: tuple[str, int] | None = None  # the summary part deltas belong to
        self.usage: UsageReport | None = None
        self.reason: FinishReason | None = None

    def feed(self, event: REvent) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        kind = event.type
        if kind == "response.output_text.delta":
            if event.delta:
                out.append(TextDelta(event.delta))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta:
                part = (event.item_id, event.summary_index)
                if self.summary is not None and self.summary != part:
                    out.append(ThinkingDelta("\n\n"))  # a new summary part or item
                self.summary = part
                out.append(ThinkingDelta(event.delta))
        elif kind == "response.refusal.delta":
            if event.delta:
                self.refused = True
                out.append(TextDelta(event.delta))
        elif kind == "response.output_item.added":
            item = event.item
            if item is not None and item.type in ("function_call", "custom_tool_call"):
                call = _Call(item.call_id or _new_call_id(), item.name)
                self.calls[item.id or f"#{event.output_index}"] = call
                out.append(ToolCallStarted(call.call_id, call.name))
        elif kind == "response.function_call_arguments.delta":
            open_call = self.calls.get(event.item_id or f"#{event.output_index}")
            if open_call is not None and event.delta:
                open_call.arguments.append(event.delta)
                out.append(ToolCallDelta(open_call.call_id, event.delta))
        elif kind == "response.output_item.done":
            out.extend(self._item_done(event))
        elif kind in ("response.completed", "response.incomplete"):
            self._answered(kind, event.response)
        self.started = self.started or bool(out)
        return out

    def _item_done(self, event: REvent) -> list[StreamEvent]:
        item = event.item
        if item is None:
            return []
        if item.type == "reasoning":
            if not item.encrypted_content:  # nothing the model could read back
                return []
            summary = [s.text for s in item.summary or () if s.text]
            return [ReasoningItem(item.id, item.encrypted_content, summary, self.source)]
        if item.type not in ("function_call", "custom_tool_call"):
            return []
        started: list[StreamEvent] = []
        call = self.calls.pop(item.id or f"#{event.output_index}", None)
        if call is None:  # a server that announced nothing
            call = _Call(item.call_id or _new_call_id(), item.name)
            started.append(ToolCallStarted(call.call_id, call.name))
        if item.type == "custom_tool_call":  # free text: the tool's one argument
            arguments: dict[str, Any] = {CUSTOM_INPUT: item.input or ""}
            error = None
        else:
            text = item.arguments if item.arguments is not None else "".join(call.arguments)
            arguments, error = parse_tool_arguments(text)
        if not call.name:
            arguments, error = {}, "the model sent a tool call without a name"
        self.called = True
        return [*started, ToolCallReady(call.call_id, call.name, arguments, error)]

    def _answered(self, kind: str, response: RResponse | None) -> None:
        if response is not None and response.usage is not None:
            self.usage = _usage(response.usage)
        if kind == "response.completed":
            self.reason = "stop"
            return
        details = response.incomplete_details if response is not None else None
        why = details.reason if details is not None else None
        self.reason = "refusal" if why == "content_filter" else "length"

    def finish(self) -> list[StreamEvent]:
        if self.reason is None:
            raise ProviderStreamError("the stream ended before the response was complete")
        events: list[StreamEvent] = []
        for call in self.calls.values():  # announced, never done: the answer was cut short
            arguments, error = parse_tool_arguments("".join(call.arguments))
            events.append(ToolCallReady(call.call_id, call.name, arguments, error))
            self.called = True
        if self.usage is not None:
            events.append(self.usage)
        reason = self.reason
        if self.refused:
            reason = "refusal"
        elif self.called and reason == "stop":
            reason = "tool_calls"
        events.append(Finished(reason))
        return events


def _new_call_id() -> str:  # for servers that send no call id
    return f"call_{os.urandom(12).hex()}"


def _usage(u: RUsage) -> UsageReport:
    cached = u.input_tokens_details.cached_tokens if u.input_tokens_details else None
    thought = u.output_tokens_details.reasoning_tokens if u.output_tokens_details else None
    return UsageReport(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cached_read_tokens=cached or 0,
        thought_tokens=thought or 0,
    )


# --------------------------------------------------------------------------- history


_encode = msgspec.json.Encoder().encode


def to_responses_input(
    request: ModelRequest, source: str, custom: set[str] | None = None
) -> list[dict[str, Any]]:
    """History as Responses input items. ``source``: the provider's name; reasoning items
    of other models are left out (no other model can read them). ``custom``: the tools
    offered as custom tools (their calls and outputs go back as custom ones)."""
    return responses_items(request.messages, source, custom)


def _any(message: Message) -> bool:
    return True  # every message's items are its own


def responses_items(
    messages: list[Message], source: str, custom: set[str] | None = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    custom_calls: set[str] = set()
    for message in messages:
        if isinstance(message, UserMessage):
            content = [_input_part(p) for p in message.parts]
            out.append({"type": "message", "role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            out.extend(_assistant_items(message, source, custom or set(), custom_calls))
        else:  # (by the tool's name: a call and its result may be encoded apart)
            kind = "custom_tool_call_output" if message.name in (custom or ()) else (
                "function_call_output")  # fmt: skip
            out.append({"type": kind, "call_id": message.call_id, "output": _output(message)})
    return out


def _input_part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    url = f"data:{part.mime_type};base64,{part.data}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _output(message: ToolResultMessage) -> str | list[dict[str, Any]]:
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
    if not any(isinstance(p, ImagePart) for p in message.parts):
        return text
    return [_input_part(p) for p in message.parts if not isinstance(p, TextPart) or p.text]


def _assistant_items(
    message: AssistantMessage, source: str, custom: set[str], custom_calls: set[str]
) -> list[dict[str, Any]]:
    """One assistant message's items in their order: reasoning, text (one message item per
    run), calls. Thinking of other vendors is not sent; a reasoning item is kept only when a
    message or a call of the same answer follows it (else the API rejects it)."""
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if "".join(text):
            items.append({"type": "message", "role": "assistant", "content": "".join(text)})
        text.clear()

    for p in message.parts:
        if isinstance(p, TextPart):
            text.append(p.text)
            continue
        if isinstance(p, ReasoningPart) and p.source == source:
            flush()
            summary = [{"type": "summary_text", "text": s} for s in p.summary]
            items.append(
                {"type": "reasoning", "summary": summary, "encrypted_content": p.encrypted_content}
            )
        elif isinstance(p, ToolCallPart) and p.name in custom:
            flush()
            custom_calls.add(p.call_id)
            patch = str(p.arguments.get(CUSTOM_INPUT, ""))
            items.append({"type": "custom_tool_call", "call_id": p.call_id, "name": p.name,
                          "input": patch})  # fmt: skip
        elif isinstance(p, ToolCallPart):
            flush()
            arguments = msgspec.json.encode(p.arguments).decode()
            call = {"call_id": p.call_id, "name": p.name, "arguments": arguments}
            items.append({"type": "function_call", **call})
    flush()
    kept: list[dict[str, Any]] = []
    answered = False  # an output item follows (scanning backwards)
    for item in reversed(items):
        if item["type"] != "reasoning":
            answered = True
        elif not answered:
            continue
        kept.append(item)
    kept.reverse()
    return kept
