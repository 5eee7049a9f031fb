"""Script steps for the fake model server and their rendering into the two SSE formats.

A step is vendor-neutral (``Text``, ``ToolCall``, ``Finish``...); :func:`openai_events` and
:func:`anthropic_events` turn a list of steps into the SSE events each vendor would send,
one ``bytes`` value per event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

# --------------------------------------------------------------------------- script steps


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Thinking:
    """Reasoning text. Anthropic: a ``signature`` closes the thinking block. OpenAI: sent in
    the delta field ``field`` (``reasoning_content`` or ``reasoning``)."""

    text: str
    signature: str | None = None
    field: str = "reasoning_content"


@dataclass(frozen=True)
class Redacted:
    data: str  # Anthropic only


@dataclass(frozen=True)
class Refusal:
    text: str  # OpenAI: ``delta.refusal``; Anthropic: plain text


@dataclass(frozen=True)
class ToolCall:
    """A tool call whose argument text is split into ``pieces`` fragments."""

    call_id: str
    name: str
    arguments: str
    pieces: int = 3


@dataclass(frozen=True)
class Usage:
    input: int  # total prompt tokens, cached ones included
    output: int
    cached: int = 0  # cache reads
    cache_write: int = 0  # Anthropic only
    reasoning: int = 0  # OpenAI only


@dataclass(frozen=True)
class Finish:
    """``stop``/``tool_calls``/``length`` are translated; any other string is sent as is."""

    reason: str


@dataclass(frozen=True)
class Raw:
    """One event written as is (``event`` names the Anthropic SSE event)."""

    data: dict[str, Any]
    event: str | None = None


@dataclass(frozen=True)
class Malformed:
    """An SSE event whose ``data`` is not JSON (a broken proxy, a truncated write)."""

    data: str = '{"choices": [{"delta": {"content": "trunc'


Step: TypeAlias = Text | Thinking | Redacted | Refusal | ToolCall | Usage | Finish | Raw | Malformed

KEEPALIVE = {
    "openai": b": keep-alive\n\n",  # an SSE comment (OpenRouter, proxies)
    "anthropic": b'event: ping\ndata: {"type": "ping"}\n\n',  # the Messages API's own
}
"""What each vendor sends to keep a quiet stream open: never an event of the answer."""

# --------------------------------------------------------------------------- wire formats


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


_OPENAI_REASON = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}
_ANTHROPIC_REASON = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def openai_events(steps: list[Step], model: str, done: bool = True) -> list[bytes]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    out: list[bytes] = []
    n_calls = 0
    for step in steps:
        if isinstance(step, Text):
            out.append(chunk({"content": step.text}))
        elif isinstance(step, Thinking):
            out.append(chunk({step.field: step.text}))
        elif isinstance(step, Refusal):
            out.append(chunk({"refusal": step.text}))
        elif isinstance(step, ToolCall):
            head = {"index": n_calls, "id": step.call_id, "type": "function"}
            fn = {"name": step.name, "arguments": ""}
            out.append(chunk({"tool_calls": [{**head, "function": fn}]}))
            for piece in _pieces(step.arguments, step.pieces):
                frag = {"index": n_calls, "function": {"arguments": piece}}
                out.append(chunk({"tool_calls": [frag]}))
            n_calls += 1
        elif isinstance(step, Usage):
            usage = {
                "prompt_tokens": step.input,
                "completion_tokens": step.output,
                "total_tokens": step.input + step.output,
                "prompt_tokens_details": {"cached_tokens": step.cached},
                "completion_tokens_details": {"reasoning_tokens": step.reasoning},
            }
            out.append(_sse({**base, "choices": [], "usage": usage}))
        elif isinstance(step, Finish):
            out.append(chunk({}, _OPENAI_REASON.get(step.reason, step.reason)))
        elif isinstance(step, Raw):
            out.append(_sse(step.data, step.event))
        elif isinstance(step, Malformed):
            out.append(f"data: {step.data}\n\n".encode())
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def anthropic_events(steps: list[Step], model: str) -> list[bytes]:
    usage = next((s for s in steps if isinstance(s, Usage)), Usage(0, 0))
    # As the API: input_tokens excludes cache reads and writes; message_delta repeats the
    # (cumulative) input counts with the final output count.
    input_usage = {
        "input_tokens": usage.input - usage.cached - usage.cache_write,
        "cache_read_input_tokens": usage.cached,
        "cache_creation_input_tokens": usage.cache_write,
    }
    start_usage = {
        **input_usage,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": 1,
    }
    message: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    out = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse({"type": "ping"}, "ping"),
    ]
    index = -1
    open_kind: str | None = None

    def emit(data: dict[str, Any]) -> None:
        out.append(_sse(data, data["type"]))

    def open_block(kind: str, block: dict[str, Any]) -> None:
        nonlocal index, open_kind
        close_block()
        index += 1
        open_kind = kind
        emit({"type": "content_block_start", "index": index, "content_block": block})

    def close_block() -> None:
        nonlocal open_kind
        if open_kind is not None:
            emit({"type": "content_block_stop", "index": index})
            open_kind = None

    def delta(d: dict[str, Any]) -> None:
        emit({"type": "content_block_delta", "index": index, "delta": d})

    for step in steps:
        if isinstance(step, (Text, Refusal)):
            if open_kind != "text":
                open_block("text", {"type": "text", "text": ""})
            delta({"type": "text_delta", "text": step.text})
        elif isinstance(step, Thinking):
            if open_kind != "thinking":
                open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            delta({"type": "thinking_delta", "thinking": step.text})
            if step.signature is not None:
                delta({"type": "signature_delta", "signature": step.signature})
                close_block()
        elif isinstance(step, Redacted):
            open_block("redacted", {"type": "redacted_thinking", "data": step.data})
            close_block()
        elif isinstance(step, ToolCall):
            block = {"type": "tool_use", "id": step.call_id, "name": step.name, "input": {}}
            open_block("tool", block)
            for piece in _pieces(step.arguments, step.pieces):
                delta({"type": "input_json_delta", "partial_json": piece})
            close_block()
        elif isinstance(step, Finish):
            close_block()
            reason = _ANTHROPIC_REASON.get(step.reason, step.reason)
            emit(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": None},
                    "usage": {**input_usage, "output_tokens": usage.output},
                }
            )
            emit({"type": "message_stop"})
        elif isinstance(step, Raw):
            out.append(_sse(step.data, step.event or step.data.get("type")))
        elif isinstance(step, Malformed):
            out.append(f"event: content_block_delta\ndata: {step.data}\n\n".encode())
    return out
