"""Script steps for the fake model server and their rendering into the vendors' SSE formats.

A step is vendor-neutral (``Text``, ``ToolCall``, ``Finish``...); :func:`openai_events`
(Chat Completions), :func:`responses_events` (OpenAI Responses) and :func:`anthropic_events`
turn a list of steps into the SSE events each would send, one ``bytes`` value per event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

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
class Reasoning:
    """OpenAI Responses: a reasoning item whose summary comes in ``summary`` parts (one
    delta each). Consecutive :class:`Thinking` steps are one item with one summary part.
    Other formats leave it out."""

    summary: tuple[str, ...] = ()


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


Step: TypeAlias = (
    Text | Thinking | Reasoning | Redacted | Refusal | ToolCall | Usage | Finish | Raw | Malformed
)

KEEPALIVE = {
    "openai": b": keep-alive\n\n",  # an SSE comment (OpenRouter, proxies)
    "responses": b": keep-alive\n\n",
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


# --------------------------------------------------------------------------- OpenAI Responses


class Issuer(Protocol):
    """Where a Responses answer gets its item ids and encrypted reasoning (the server's
    memory of what it issued: ``tests.fakes.llm_responses.ResponsesState``)."""

    def new_id(self, prefix: str) -> str: ...

    def seal(self, reasoning_id: str) -> str | None:
        """The item's encrypted content, or ``None`` when the request did not ask for it."""
        ...

    @property
    def custom(self) -> set[str]:
        """The tools the request offered as custom tools (their calls are free text)."""
        ...

    def followed(self, reasoning_id: str, item_id: str) -> None:
        """``item_id`` is the output item that came right after the reasoning item."""
        ...


_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def responses_events(steps: list[Step], model: str, issuer: Issuer) -> list[bytes]:
    """The Responses stream: ``response.created``, output items (reasoning with summary
    parts, messages with text or refusal parts, function calls with argument deltas), then
    ``Finish``: ``stop``/``tool_calls`` -> ``response.completed``, ``length`` and
    ``content_filter`` -> ``response.incomplete``, anything else -> ``response.failed`` with
    that error code."""
    out: list[bytes] = []
    response: dict[str, Any] = {"id": issuer.new_id("resp"), "object": "response",
                                "created_at": 0, "model": model, "status": "in_progress",
                                "output": []}  # fmt: skip
    done: list[dict[str, Any]] = []
    usage = next((s for s in steps if isinstance(s, Usage)), Usage(0, 0))
    item: dict[str, Any] | None = None  # the open reasoning or message item
    part: dict[str, Any] | None = None  # its open summary or content part
    after_reasoning: str | None = None  # a reasoning item's id, until the next item opens

    def emit(kind: str, **data: Any) -> None:
        out.append(_sse({"type": kind, "sequence_number": len(out), **data}, kind))

    def where() -> dict[str, Any]:
        assert item is not None
        return {"item_id": item["id"], "output_index": len(done)}

    def open_item(new: dict[str, Any]) -> None:
        nonlocal item, after_reasoning
        close_item()
        if after_reasoning is not None:
            issuer.followed(after_reasoning, new["id"])
            after_reasoning = None
        item = new
        emit("response.output_item.added", output_index=len(done), item=new)

    def close_part() -> None:
        nonlocal part
        if item is None or part is None:
            return
        if item["type"] == "reasoning":
            index = {"summary_index": len(item["summary"])}
            emit("response.reasoning_summary_text.done", **where(), **index, text=part["text"])
            emit("response.reasoning_summary_part.done", **where(), **index, part=part)
            item["summary"].append(part)
        else:
            index = {"content_index": len(item["content"])}
            if part["type"] == "output_text":
                emit("response.output_text.done", **where(), **index, text=part["text"])
            else:
                emit("response.refusal.done", **where(), **index, refusal=part["refusal"])
            emit("response.content_part.done", **where(), **index, part=part)
            item["content"].append(part)
        part = None

    def close_item() -> None:
        nonlocal item, after_reasoning
        if item is None:
            return
        close_part()
        finished = {**item, "status": "completed"}
        if item["type"] == "reasoning":
            finished.pop("status")
            sealed = issuer.seal(item["id"])
            if sealed is not None:
                finished["encrypted_content"] = sealed
            after_reasoning = item["id"]
        emit("response.output_item.done", output_index=len(done), item=finished)
        done.append(finished)
        item = None

    def open_part(kind: str, new: dict[str, Any]) -> None:
        nonlocal part
        close_part()
        part = new
        assert item is not None
        key = "summary" if kind == "reasoning" else "content"
        index = {"summary_index" if kind == "reasoning" else "content_index": len(item[key])}
        added = "response.reasoning_summary_part.added" if kind == "reasoning" else (
            "response.content_part.added")  # fmt: skip
        emit(added, **where(), **index, part={**new})

    def summary_delta(text: str, new_part: bool) -> None:
        if item is None or item["type"] != "reasoning":
            open_item({"id": issuer.new_id("rs"), "type": "reasoning", "summary": []})
            new_part = True
        if new_part or part is None:
            open_part("reasoning", {"type": "summary_text", "text": ""})
        assert item is not None and part is not None
        part["text"] += text
        emit("response.reasoning_summary_text.delta", **where(),
             summary_index=len(item["summary"]), delta=text)  # fmt: skip

    def message_delta(text: str, kind: str) -> None:
        if item is None or item["type"] != "message":
            open_item({"id": issuer.new_id("msg"), "type": "message", "status": "in_progress",
                       "role": "assistant", "content": []})  # fmt: skip
        field = "text" if kind == "output_text" else "refusal"
        if part is None or part["type"] != kind:
            extra: dict[str, Any] = {"annotations": []} if kind == "output_text" else {}
            open_part("message", {"type": kind, field: "", **extra})
        assert item is not None and part is not None
        part[field] += text
        emit(f"response.{kind}.delta", **where(), content_index=len(item["content"]), delta=text)

    emit("response.created", response=response)
    emit("response.in_progress", response=response)
    for step in steps:
        if isinstance(step, Thinking):
            summary_delta(step.text, new_part=False)
        elif isinstance(step, Reasoning):
            close_item()
            for i, text in enumerate(step.summary):
                summary_delta(text, new_part=i > 0)
            if not step.summary:
                open_item({"id": issuer.new_id("rs"), "type": "reasoning", "summary": []})
            close_item()
        elif isinstance(step, Text):
            message_delta(step.text, "output_text")
        elif isinstance(step, Refusal):
            message_delta(step.text, "refusal")
        elif isinstance(step, ToolCall):  # a custom tool's call carries its text as is
            custom = step.name in issuer.custom
            kind, field, prefix, event = (
                ("custom_tool_call", "input", "ctc", "response.custom_tool_call_input")
                if custom else
                ("function_call", "arguments", "fc", "response.function_call_arguments"))
            call = {"id": issuer.new_id(prefix), "type": kind, "status": "in_progress",
                    field: "", "call_id": step.call_id, "name": step.name}  # fmt: skip
            open_item(call)
            at = {"item_id": call["id"], "output_index": len(done)}
            for piece in _pieces(step.arguments, step.pieces):
                emit(f"{event}.delta", **at, delta=piece)
            emit(f"{event}.done", **at, **{field: step.arguments})
            call[field] = step.arguments
            close_item()
        elif isinstance(step, Finish):
            close_item()
            tokens = {
                "input_tokens": usage.input,
                "input_tokens_details": {"cached_tokens": usage.cached},
                "output_tokens": usage.output,
                "output_tokens_details": {"reasoning_tokens": usage.reasoning},
                "total_tokens": usage.input + usage.output,
            }
            final = {**response, "output": done, "usage": tokens}
            if step.reason in ("stop", "tool_calls"):
                emit("response.completed", response={**final, "status": "completed"})
            elif step.reason in _INCOMPLETE:
                details = {"reason": _INCOMPLETE[step.reason]}
                emit("response.incomplete", response={**final, "status": "incomplete",
                                                      "incomplete_details": details})  # fmt: skip
            else:
                error = {"code": step.reason, "message": f"The response failed ({step.reason})."}
                emit("response.failed", response={**final, "status": "failed", "error": error})
        elif isinstance(step, Raw):
            out.append(_sse(step.data, step.event or step.data.get("type")))
        elif isinstance(step, Malformed):
            out.append(f"data: {step.data}\n\n".encode())
    return out
