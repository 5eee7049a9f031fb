"""OpenAI Chat Completions streaming, for api.openai.com and any OpenAI-compatible server
(Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), through the official ``openai`` SDK.

The SDK is imported on first :meth:`OpenAIProvider.stream`, never at module import: it
costs about a second and the agent must answer ``initialize`` long before. The SDK never
retries (``max_retries=0``); the turn engine does, using ``ProviderHTTPError.retry_after``.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    UserPart,
)
from ..errors import ProviderAuthError, ProviderError, ProviderStreamError
from . import _http
from ._limits import DISCOVERY_TIMEOUT, Unanswered, discover, fit_output
from ._sdk import (
    REHEARSAL,
    Ahead,
    Origin,
    Posted,
    body_of,
    connect_ahead,
    failed,
    parse_tool_arguments,
    path_segment,
    rehearse,
    relay,
)
from ._wire import Chunk, Delta, EventStream, ToolCallFragment, Usage, openai_event
from .base import (
    Finished,
    FinishReason,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)
from .history import encoded
from .registry import has_auth_header

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .models import ServerLimits

_EMPTY_DELTA = Delta()

PLACEHOLDER_KEY = "no-key"  # local OpenAI-compatible servers want some bearer token, not a real one
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
}
# Official models that take ``reasoning_effort``: o1/o3/o4-mini..., gpt-5* except gpt-5-chat.
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5(?!.*-chat))")


class OpenAIProvider:
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        default_headers: dict[str, str] | None = None,
        key_env: str | None = "OPENAI_API_KEY",
        vendor: str = "OpenAI",
        section: str = "openai",
        discover_limits: bool = False,
        connect_path: str | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key or None
        self._base_url = base_url or None
        self._official = self._base_url is None or "api.openai.com" in self._base_url
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._headers = default_headers
        self._key_env = key_env
        self._client: AsyncOpenAI | None = None
        self._discover = discover_limits and not self._official
        self._limits: ServerLimits | None = None
        self._asked: asyncio.Future[tuple[ServerLimits | None, bool]] | None = None
        self._asked_ahead = False  # the question under way was asked ahead of any turn
        self.discovery_timeout = DISCOVERY_TIMEOUT
        self._connect_path = connect_path or f"/models/{path_segment(model)}"
        self._ahead = Ahead()
        self.origin = Origin(
            vendor,
            self.endpoint,
            model,
            section,
            key_env=key_env,
            has_key=self._api_key is not None,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    @property
    def endpoint(self) -> str:
        return self._base_url or "https://api.openai.com/v1"

    def _ensure_client(self) -> AsyncOpenAI:
        if self._client is None:
            if self._api_key is None and self._base_url is None and not has_auth_header(
                self._headers
            ):
                raise ProviderAuthError(
                    f"No {self.origin.vendor} API key: set {self._key_env or 'OPENAI_API_KEY'}"
                    " or run `acp-agent login` (or give a base URL for a local server)"
                )
            self._client = self._new_client()
        return self._client

    def _new_client(self, base_url: str | None = None) -> AsyncOpenAI:
        # the SDK (heavy): the warm-up thread imports it, never the way to `initialize`
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key or PLACEHOLDER_KEY,
            base_url=base_url or self._base_url,
            timeout=openai.Timeout(self._timeout, connect=self._connect_timeout),
            max_retries=0,
            default_headers=self._headers,
            http_client=_http.http_client(openai),
        )

    #: The rehearsal's answer (see :meth:`prepare`).
    REHEARSAL_BODY = (
        b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n'
        b"data: [DONE]\n\n"
    )

    def prepare(self, rehearse_request: bool = True) -> None:
        """Ready the first request, in a worker thread (never on the event loop): the SDK
        client (its TLS context alone takes tens of ms) and, with ``rehearse_request``,
        one request through the whole path against a loopback server of this process
        (see :func:`._sdk.rehearse`). Contacts no server."""
        try:
            self._ensure_client()
        except ProviderError:
            return  # no key: the first prompt says so
        if rehearse_request:
            rehearse(
                lambda client: self._stream(REHEARSAL, client),
                self._new_client,
                self.REHEARSAL_BODY,
            )

    async def server_limits(self) -> ServerLimits | None:
        """The model's limits as a compatible server reports them (asked once; see
        :mod:`._limits`); from then on ``max_tokens`` stays within what the window leaves."""
        if not self._discover or self._base_url is None:
            return None
        return (await self._question(ahead=False))[0]

    async def _question(self, ahead: bool) -> tuple[ServerLimits | None, bool]:
        """The limits and whether the server answered: one question however many ask at
        once. One asked ahead of any turn (:meth:`connect`) that got no answer is
        forgotten; a turn that was waiting for it asks again, and its own question is
        kept, answered or not."""
        assert self._base_url is not None
        if self._asked is None:
            self._asked = asyncio.ensure_future(self._ask(self._base_url))
            self._asked_ahead = ahead
        asked, asked_ahead = self._asked, self._asked_ahead
        limits, answered = await asyncio.shield(asked)
        if not answered and asked_ahead:
            if self._asked is asked:
                self._asked = None
            if not ahead:
                return await self._question(ahead=False)
        return limits, answered

    async def _ask(self, base_url: str) -> tuple[ServerLimits | None, bool]:
        try:
            client = self._ensure_client()
        except ProviderError:
            return None, True  # no key: nothing to ask, nothing to ask again
        try:
            self._limits = await discover(client, self.model, base_url, self.discovery_timeout)
        except Unanswered:
            return None, False
        return self._limits, True

    async def connect(self) -> None:
        """Open the connection the next prompt will use (see :class:`._sdk.Ahead`): a
        compatible server is asked for the model's limits (the turn then need not; a
        question under way is joined), else ``GET {base}/models/{model}``
        (``connect_path``: OpenRouter's key description)."""
        await self._ahead.connect(self._connect_ahead)

    async def _connect_ahead(self) -> bool:
        client = self._ensure_client()  # no key: raises, and nothing is sent
        if self._discover and (self._asked is None or not self._asked.done()):
            return (await self._question(ahead=True))[1]
        return await connect_ahead(client, self._connect_path)

    def fit(self, request: ModelRequest) -> ModelRequest:
        return fit_output(request, self._limits)

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request's parameters, converted whole (what :meth:`request_body` encodes)."""
        return self._params(request, to_openai_messages(request))

    def request_body(self, request: ModelRequest) -> bytes:
        """The body sent: :meth:`request_params` encoded, the history's earlier messages
        taken from the conversation's cache (:mod:`.history`)."""
        history = encoded(request.history_cache, "chat", request.messages, openai_history,
                          _opens_group)  # fmt: skip
        head = _encode([_system(request.system)]) if request.system else b""
        messages = msgspec.Raw(history.array(head=head))
        return _encode(body_of(self._params(request, messages)))

    def _params(self, request: ModelRequest, messages: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.max_tokens is not None:
            key = "max_completion_tokens" if self._official else "max_tokens"
            params[key] = request.max_tokens
        if request.thinking != "off" and self._official and _REASONING_MODEL.match(self.model):
            params["reasoning_effort"] = request.thinking
        if request.cache_key and self._official:
            # Routes the session's requests to the servers holding its cached prefix. Only
            # api.openai.com: compatible servers may reject unknown fields (NVIDIA NIM does;
            # vLLM and Ollama ignore them). ``extra_body``: SDKs before 1.98 lack the argument.
            params["extra_body"] = {"prompt_cache_key": request.cache_key}
        return params

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:  # the SDK's import is our time, not the server's: done before any wait is timed
            client = self._ensure_client()
        except ProviderError as exc:
            return failed(exc)
        self._ahead.used()
        return self._stream(self.fit(request), client)

    def _stream(self, request: ModelRequest, client: AsyncOpenAI) -> AsyncIterator[StreamEvent]:
        async def open_stream() -> EventStream[Chunk]:
            raw = Posted(client, "/chat/completions", self.request_body(request))
            return await EventStream(raw, Chunk, openai_event).open()

        return relay(open_stream, _ChunkAssembler(), self.origin)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


# --------------------------------------------------------------------------- stream assembly


@dataclass
class _Call:
    server_id: str | None = None
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ChunkAssembler:
    """Turns chunks into events; keeps tool-call fragments (keyed by ``index``) until the end."""

    def __init__(self) -> None:
        self.started = False
        self.reason: FinishReason | None = None
        self.refused = False
        self.usage: UsageReport | None = None
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}

    def feed(self, chunk: Chunk) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta or _EMPTY_DELTA
            # vLLM/DeepSeek send ``reasoning_content``; Ollama/OpenRouter ``reasoning``.
            thought = delta.reasoning_content or delta.reasoning
            if thought:
                events.append(ThinkingDelta(thought))
            if delta.content:
                events.append(TextDelta(delta.content))
            if delta.refusal:
                self.refused = True
                events.append(TextDelta(delta.refusal))
            for fragment in delta.tool_calls or ():
                self._tool_fragment(fragment, events)
            if choice.finish_reason:
                self.reason = _FINISH.get(choice.finish_reason, "stop")
        self.started = self.started or bool(events)
        return events

    def _tool_fragment(self, frag: ToolCallFragment, events: list[StreamEvent]) -> None:
        index = frag.index if frag.index is not None else len(self.calls)
        call = self.by_index.get(index)
        # Some servers reuse index 0 for every call: a new id means a new call.
        if call is None or (frag.id and call.server_id and frag.id != call.server_id):
            call = self.by_index[index] = _Call()
            self.calls.append(call)
        if frag.id and not call.server_id:
            call.server_id = frag.id
        if frag.function is not None:
            piece = frag.function.arguments
            if piece:
                call.arguments.append(piece)
            if frag.function.name and not call.name:
                call.name = frag.function.name
                call.call_id = call.server_id or _new_call_id()
                events.append(ToolCallStarted(call.call_id, call.name))
                piece = "".join(call.arguments)  # any that came before the name, too
            if piece and call.name:
                events.append(ToolCallDelta(call.call_id, piece))

    def finish(self) -> list[StreamEvent]:
        if self.reason is None:
            raise ProviderStreamError("the stream ended without a finish reason")
        events: list[StreamEvent] = []
        for call in self.calls:
            arguments, error = parse_tool_arguments("".join(call.arguments))
            if not call.name:
                arguments, error = {}, "the model sent a tool call without a name"
            call_id = call.call_id or call.server_id or _new_call_id()
            events.append(ToolCallReady(call_id, call.name, arguments, error))
        if self.usage is not None:
            events.append(self.usage)
        reason = self.reason
        if self.refused:
            reason = "refusal"
        elif self.calls and reason == "stop":  # Ollama and others finish tool calls with "stop"
            reason = "tool_calls"
        events.append(Finished(reason))
        return events


def _new_call_id() -> str:  # for servers that send no call id
    return f"call_{os.urandom(12).hex()}"


def _usage(u: Usage) -> UsageReport:
    prompt = u.prompt_tokens_details
    completion = u.completion_tokens_details
    return UsageReport(
        input_tokens=u.prompt_tokens or 0,
        output_tokens=u.completion_tokens or 0,
        cached_read_tokens=(prompt.cached_tokens or 0) if prompt else 0,
        thought_tokens=(completion.reasoning_tokens or 0) if completion else 0,
    )


# --------------------------------------------------------------------------- history


_encode = msgspec.json.Encoder().encode


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    head = [_system(request.system)] if request.system else []
    return head + openai_history(request.messages)


def _system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def _opens_group(message: Message) -> bool:
    """Where the conversion starts afresh: any message but a tool result (images of a run
    of tool results follow the run)."""
    return not isinstance(message, ToolResultMessage)


def openai_history(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []  # from tool results: sent after the run of tool messages
    for message in messages:
        if images and not isinstance(message, ToolResultMessage):
            out.append({"role": "user", "content": images})
            images = []
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.parts)})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message))
        else:
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            pictures = [_image(p) for p in message.parts if isinstance(p, ImagePart)]
            if pictures:
                text += f"\n[{len(pictures)} image(s) attached in the next user message]"
                label = f"Images returned by tool call {message.call_id} ({message.name}):"
                images += [{"type": "text", "text": label}, *pictures]
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
    if images:
        out.append({"role": "user", "content": images})
    return out


def _image(part: ImagePart) -> dict[str, Any]:
    url = f"data:{part.mime_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(parts: list[UserPart]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text  # plain string: the form every compatible server accepts
    return [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else _image(p) for p in parts
    ]


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = [
        {
            "id": p.call_id,
            "type": "function",
            "function": {"name": p.name, "arguments": msgspec.json.encode(p.arguments).decode()},
        }
        for p in message.parts
        if isinstance(p, ToolCallPart)
    ]
    if not calls:
        return {"role": "assistant", "content": text}
    return {"role": "assistant", "content": text or None, "tool_calls": calls}
