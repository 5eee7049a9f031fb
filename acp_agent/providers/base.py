"""The provider seam: a provider-neutral conversation and one closed union of stream events.

Providers know nothing of ACP. The turn engine builds a :class:`ModelRequest` from the
session history, calls :meth:`ModelProvider.stream`, and consumes :data:`StreamEvent`
values. Vendor bookkeeping (argument fragments keyed by index, content-block indices,
SSE framing) stays inside each provider: the turn engine only ever sees complete tool
calls (:class:`ToolCallReady`).

Errors: a provider raises :class:`acp_agent.errors.ProviderError` subclasses (never a
vendor exception). ``asyncio.CancelledError`` always propagates untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from ..conversation import Message, ToolSpec
from .history import HistoryCache

ThinkingLevel: TypeAlias = Literal["off", "low", "medium", "high"]


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = []
    max_tokens: int | None = None
    thinking: ThinkingLevel = "off"
    cache_key: str | None = None
    """Prompt caching: a stable id shared by requests that grow one conversation (the
    session's id), or ``None`` for no caching hints. Anthropic marks cache breakpoints only
    when it is set; OpenAI's official endpoint gets it as ``prompt_cache_key``."""
    history_cache: HistoryCache | None = None
    """The conversation's (the session's): where providers keep what they made of its
    earlier messages, for its next request (see :mod:`.history`). ``None``: a request of
    its own, converted whole."""


# --------------------------------------------------------------------------- stream events


class TextDelta(msgspec.Struct, tag_field="event", tag="text", frozen=True):
    text: str


class ThinkingDelta(msgspec.Struct, tag_field="event", tag="thinking", frozen=True):
    text: str


class ThinkingSignature(msgspec.Struct, tag_field="event", tag="thinking_signature", frozen=True):
    """Closes the current thinking block with the vendor's signature."""

    signature: str


class RedactedThinking(msgspec.Struct, tag_field="event", tag="redacted_thinking", frozen=True):
    data: str


class ReasoningItem(msgspec.Struct, tag_field="event", tag="reasoning_item", frozen=True):
    """A reasoning model's opaque reasoning item, complete (OpenAI Responses): kept in history
    as a :class:`~acp_agent.conversation.ReasoningPart` and sent back with the turn's tool
    results. ``source`` is the provider's name; only that provider reads it back."""

    id: str
    encrypted_content: str
    summary: list[str] = []
    source: str = ""


class ToolCallStarted(msgspec.Struct, tag_field="event", tag="tool_call_started", frozen=True):
    """Early notice that the model began a tool call (arguments still streaming)."""

    call_id: str
    name: str


class ToolCallDelta(msgspec.Struct, tag_field="event", tag="tool_call_delta", frozen=True):
    """The next piece of a started call's argument JSON, as the model writes it (the
    pieces joined are the text :class:`ToolCallReady` parses)."""

    call_id: str
    arguments: str


class ToolCallReady(msgspec.Struct, tag_field="event", tag="tool_call", frozen=True):
    """A complete tool call. ``error`` is set (and ``arguments`` empty) when the model's
    argument text was not a JSON object; the turn reports that back to the model."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None


class UsageReport(msgspec.Struct, tag_field="event", tag="usage", frozen=True, kw_only=True):
    """Token counts for the whole request (not a delta). ``input_tokens`` includes cached ones."""

    input_tokens: int
    output_tokens: int
    cached_read_tokens: int = 0
    cached_write_tokens: int = 0
    thought_tokens: int = 0


FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "refusal"]


class Finished(msgspec.Struct, tag_field="event", tag="finished", frozen=True):
    reason: FinishReason


StreamEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ThinkingSignature
    | RedactedThinking
    | ReasoningItem
    | ToolCallStarted
    | ToolCallDelta
    | ToolCallReady
    | UsageReport
    | Finished
)


# --------------------------------------------------------------------------- the interface


class ModelProvider(Protocol):
    """One model behind one wire format.

    ``stream`` is an async generator: it yields events for one model request and ends
    after :class:`Finished`. A stream that ends without ``Finished`` is a broken stream
    and the provider raises :class:`~acp_agent.errors.ProviderStreamError` instead.
    """

    @property
    def name(self) -> str:
        """``"<provider>:<model>"``, e.g. ``"openai:gpt-4.1"``."""
        ...

    @property
    def endpoint(self) -> str:
        """Where requests go (a base URL), for error messages."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...
