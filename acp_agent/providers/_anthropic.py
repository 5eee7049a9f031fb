"""Anthropic Messages streaming (raw SSE events) through the official ``anthropic`` SDK.

The SDK is imported on first :meth:`AnthropicProvider.stream`, never at module import (it
costs seconds). It never retries (``max_retries=0``): the turn engine does. Thinking blocks
stream as :class:`ThinkingDelta` and close with :class:`ThinkingSignature`, so the turn engine
can keep each block with its signature; only signed blocks are sent back in history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserMessage,
    UserPart,
)
from ..errors import ProviderAuthError, ProviderError, ProviderStreamError
from . import _http
from ._sdk import (
    REHEARSAL,
    Ahead,
    Origin,
    Posted,
    connect_ahead,
    failed,
    parse_tool_arguments,
    path_segment,
    rehearse,
    relay,
)
from ._wire import AEvent, EventStream, anthropic_event
from .base import (
    Finished,
    FinishReason,
    ModelRequest,
    RedactedThinking,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)
from .history import encoded
from .models import model_info
from .registry import has_auth_header

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}
_MIN_BUDGET = 1024  # the API's minimum
_ANSWER_ROOM = 1024  # tokens kept for the answer when the budget is clamped below max_tokens
_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


class AnthropicProvider:
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        default_headers: dict[str, str] | None = None,
        default_max_tokens: int = 8192,
        key_env: str | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key or None
        self._auth_token = None if self._api_key else auth_token
        self._base_url = base_url or None
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._headers = default_headers
        self._default_max_tokens = default_max_tokens
        self._client: AsyncAnthropic | None = None
        self._ahead = Ahead()
        if key_env is None:
            key_env = "ANTHROPIC_AUTH_TOKEN" if self._auth_token else "ANTHROPIC_API_KEY"
        self._key_env = key_env
        self.origin = Origin(
            "Anthropic",
            self.endpoint,
            model,
            "anthropic",
            key_env=key_env,
            has_key=bool(self._api_key or self._auth_token),
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    @property
    def endpoint(self) -> str:
        return self._base_url or "https://api.anthropic.com"

    def _ensure_client(self) -> AsyncAnthropic:
        if self._client is None:
            if not (self._api_key or self._auth_token or has_auth_header(self._headers)):
                raise ProviderAuthError(
                    f"No Anthropic API key: set {self._key_env} or run `acp-agent login`"
                )
            self._client = self._new_client()
        return self._client

    def _new_client(self, base_url: str | None = None) -> AsyncAnthropic:
        # the SDK (heavy): the warm-up thread imports it, never the way to `initialize`
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            auth_token=self._auth_token,
            base_url=base_url or self._base_url,
            timeout=anthropic.Timeout(self._timeout, connect=self._connect_timeout),
            max_retries=0,
            default_headers=self._headers,
            http_client=_http.http_client(anthropic),
        )

    def prepare(self, rehearse_request: bool = True) -> None:
        """Ready the first request, in a worker thread (never on the event loop): the SDK
        client and, with ``rehearse_request``, one request through the whole path against a
        loopback server of this process (see :func:`._sdk.rehearse`). Contacts no server."""
        try:
            self._ensure_client()
        except ProviderError:
            return  # no key: the first prompt says so
        if rehearse_request:
            rehearse(lambda client: self._stream(REHEARSAL, client), self._new_client, _REHEARSAL)

    async def connect(self) -> None:
        """Open the connection the next prompt will use (see :class:`._sdk.Ahead`) with
        ``GET /v1/models/{model}``, the model's description."""
        await self._ahead.connect(self._connect_ahead)

    async def _connect_ahead(self) -> bool:
        return await connect_ahead(self._ensure_client(), f"/v1/models/{path_segment(self.model)}")

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request's parameters, converted whole (what :meth:`request_body` encodes)."""
        return self._params(request, to_anthropic_messages(request))

    def request_body(self, request: ModelRequest) -> bytes:
        """The body sent: :meth:`request_params` encoded, the history's earlier messages
        taken from the conversation's cache (:mod:`.history`); the turns that carry cache
        breakpoints are marked on copies and encoded now."""
        history = encoded(request.history_cache, "messages", request.messages,
                          anthropic_history, _opens_group)  # fmt: skip
        if request.cache_key is None:
            return _encode(self._params(request, msgspec.Raw(history.array())))
        tail = history.tail(_holds_breakpoints)
        params = self._params(request, history.vendor(tail))
        params["messages"] = msgspec.Raw(history.array(tail, more=_encode(params["messages"])))
        return _encode(params)

    def _params(self, request: ModelRequest, messages: Any) -> dict[str, Any]:
        max_tokens = request.max_tokens or self._default_max_tokens
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.cache_key is not None:
            mark_cache_breakpoints(params)
        if request.thinking != "off":
            budget = THINKING_BUDGET[request.thinking]
            if request.max_tokens is None:  # room for thinking and an answer, within the model
                cap = model_info("anthropic", self.model).max_output_tokens
                max_tokens = max(max_tokens, min(budget + max_tokens, cap))
            budget = min(budget, max_tokens - _ANSWER_ROOM)
            if budget < _MIN_BUDGET:
                budget, max_tokens = _MIN_BUDGET, max(max_tokens, _MIN_BUDGET + _ANSWER_ROOM)
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        params["max_tokens"] = max_tokens
        return params

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:  # the SDK's import is our time, not the server's: done before any wait is timed
            client = self._ensure_client()
        except ProviderError as exc:
            return failed(exc)
        self._ahead.used()
        return self._stream(request, client)

    def _stream(self, request: ModelRequest, client: AsyncAnthropic) -> AsyncIterator[StreamEvent]:
        async def open_stream() -> EventStream[AEvent]:
            raw = Posted(client, "/v1/messages", self.request_body(request))
            return await EventStream(raw, AEvent, anthropic_event).open()

        return relay(open_stream, _EventAssembler(), self.origin)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


_REHEARSAL = b"".join(
    b"event: %s\ndata: %s\n\n" % (kind, data)
    for kind, data in (
        (b"message_start", b'{"type":"message_start","message":{"usage":{"input_tokens":1}}}'),
        (b"content_block_start", b'{"type":"content_block_start","index":0,'
                                 b'"content_block":{"type":"text","text":""}}'),
        (b"content_block_delta", b'{"type":"content_block_delta","index":0,'
                                 b'"delta":{"type":"text_delta","text":"ok"}}'),
        (b"content_block_stop", b'{"type":"content_block_stop","index":0}'),
        (b"message_delta", b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},'
                           b'"usage":{"output_tokens":1}}'),
        (b"message_stop", b'{"type":"message_stop"}'),
    )
)  # fmt: skip
"""The rehearsal's answer (see :meth:`AnthropicProvider.prepare`)."""


# --------------------------------------------------------------------------- stream assembly


@dataclass
class _Block:
    kind: str
    signature: str = ""
    call_id: str = ""
    name: str = ""
    initial_input: Any = None
    json: list[str] = field(default_factory=list)


class _EventAssembler:
    """Turns raw Messages stream events into :data:`StreamEvent` values."""

    def __init__(self) -> None:
        self.started = False
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}

    def feed(self, event: Any) -> list[StreamEvent]:  # Any: compatible proxies vary
        out: list[StreamEvent] = []
        kind = event.type
        if kind == "message_start":
            self._usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            b = self.blocks[event.index] = _Block(block.type)
            if block.type == "text" and block.text:
                out.append(TextDelta(block.text))
            elif block.type == "thinking" and block.thinking:
                out.append(ThinkingDelta(block.thinking))
            elif block.type == "redacted_thinking":
                out.append(RedactedThinking(block.data))
            elif block.type == "tool_use":
                b.call_id, b.name, b.initial_input = block.id, block.name, block.input
                out.append(ToolCallStarted(block.id, block.name))
        elif kind == "content_block_delta":
            b = self.blocks.get(event.index) or _Block("unknown")
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                out.append(TextDelta(delta.text))
            elif delta.type == "thinking_delta" and delta.thinking:
                out.append(ThinkingDelta(delta.thinking))
            elif delta.type == "signature_delta":
                b.signature += delta.signature
            elif delta.type == "input_json_delta":
                b.json.append(delta.partial_json)
                if b.call_id and delta.partial_json:
                    out.append(ToolCallDelta(b.call_id, delta.partial_json))
        elif kind == "content_block_stop":
            b = self.blocks.pop(event.index, _Block("unknown"))
            if b.kind == "thinking" and b.signature:
                out.append(ThinkingSignature(b.signature))
            elif b.kind == "tool_use":
                text = "".join(b.json)
                arguments, error = parse_tool_arguments(text)
                if not text and isinstance(b.initial_input, dict):
                    arguments = b.initial_input  # a proxy sent the whole input up front
                out.append(ToolCallReady(b.call_id, b.name, arguments, error))
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._usage(event.usage)
        self.started = self.started or bool(out)
        return out

    def _usage(self, usage: Any) -> None:
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                     "cache_creation_input_tokens"):  # fmt: skip
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self.usage[name] = value

    def finish(self) -> list[StreamEvent]:
        if self.stop_reason is None:
            raise ProviderStreamError("the stream ended without a stop reason")
        read = self.usage.get("cache_read_input_tokens", 0)
        write = self.usage.get("cache_creation_input_tokens", 0)
        usage = UsageReport(
            input_tokens=self.usage.get("input_tokens", 0) + read + write,
            output_tokens=self.usage.get("output_tokens", 0),
            cached_read_tokens=read,
            cached_write_tokens=write,
        )
        return [usage, Finished(_STOP.get(self.stop_reason, "stop"))]


# --------------------------------------------------------------------------- prompt caching

MAX_BREAKPOINTS = 4  # the API rejects a request with more ``cache_control`` blocks
_UNCACHEABLE = ("thinking", "redacted_thinking")  # the API rejects cache_control on these


def mark_cache_breakpoints(params: dict[str, Any]) -> None:
    """Cache breakpoints (``cache_control``) on the request's prefix, which the API renders
    as tools, system, messages. A breakpoint caches everything before it; a later request
    with the same prefix reads it at a tenth of the input price (writing costs 1.25x):

    1. the last tool: the toolset is the same for every session of a mode, so a new
       session reads it from the cache;
    2. the system prompt (sent as a text block to carry the mark): the session's prefix;
    3. the end of the previous user turn, where the previous request's cache ends: read
       back even when the newest exchange added more blocks (parallel tool calls and their
       results) than the API looks back from a breakpoint (about 20);
    4. the last block of the newest message: written now, read by the next request.

    Never on thinking blocks or empty text (the API rejects both); four at most, by
    construction. Marked blocks are copies, and so are the lists and messages holding
    them: what ``params`` holds may be shared (a conversation's kept messages).
    """
    if tools := params.get("tools"):
        params["tools"] = [*tools[:-1], {**tools[-1], "cache_control": _ephemeral()}]
    if system := params.get("system"):
        params["system"] = [{"type": "text", "text": system, "cache_control": _ephemeral()}]
    messages: list[dict[str, Any]] = list(params["messages"])
    params["messages"] = messages
    if messages:
        last = len(messages) - 1
        previous = next((i for i in range(last - 1, -1, -1) if messages[i]["role"] == "user"),
                        None)  # fmt: skip
        for i in (previous, last):
            if i is not None:
                messages[i] = _marked(messages[i])


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with a breakpoint on its last cacheable block (a copy), if it has one."""
    content: list[dict[str, Any]] = message["content"]
    for i in range(len(content) - 1, -1, -1):
        block = content[i]
        if block["type"] in _UNCACHEABLE or (block["type"] == "text" and not block["text"]):
            continue
        marked = {**block, "cache_control": _ephemeral()}
        return {**message, "content": [*content[:i], marked, *content[i + 1 :]]}
    return message


def _holds_breakpoints(messages: list[dict[str, Any]]) -> bool:
    """Whether a tail of the messages holds both marked turns (the last, the previous
    user turn)."""
    return any(m["role"] == "user" for m in messages[:-1])


# --------------------------------------------------------------------------- history


_encode = msgspec.json.Encoder().encode


def to_anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """History as Messages API turns: roles alternate, so consecutive tool results and
    user messages merge into one user turn (tool results first, as the API wants)."""
    return anthropic_history(request.messages)


def _opens_group(message: Message) -> bool:
    """Where the conversion starts afresh: an assistant turn that is sent (what follows
    cannot merge into what came before it)."""
    return isinstance(message, AssistantMessage) and bool(_assistant_content(message))


def anthropic_history(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user turn of tool results
    for message in messages:
        if isinstance(message, UserMessage):
            results = None
            content = _content(message.parts)
            if out and out[-1]["role"] == "user":
                out[-1]["content"] = [*out[-1]["content"], *content]
            else:
                out.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            results = None
            content = _assistant_content(message)
            if content:  # the API rejects an empty assistant turn
                out.append({"role": "assistant", "content": content})
        else:
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "is_error": message.is_error,
            }
            if inner := _content(message.parts):
                block["content"] = inner
            results.append(block)
    return out


def _content(parts: list[UserPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            if p.text:  # the API rejects empty text blocks
                out.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            source = {"type": "base64", "media_type": p.mime_type, "data": p.data}
            out.append({"type": "image", "source": source})
    return out


def _assistant_content(message: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in message.parts:
        if isinstance(p, ThinkingPart):
            if p.signature:  # unsigned thinking (other vendors, broken streams) is dropped
                out.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, RedactedThinkingPart):
            out.append({"type": "redacted_thinking", "data": p.data})
        elif isinstance(p, TextPart):
            if p.text:
                out.append({"type": "text", "text": p.text})
        elif isinstance(p, ToolCallPart):
            out.append({"type": "tool_use", "id": p.call_id, "name": p.name, "input": p.arguments})
    return out
