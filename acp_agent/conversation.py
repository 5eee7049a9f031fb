"""The conversation's own vocabulary: messages, their parts, and the tools offered.

Neutral ground that providers, tools, the turn engine, the session and the store all stand
on (none of them depends on another to name a message). History types are msgspec Structs
tagged by ``kind``/``role`` so the session store persists them as they are.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec


class TextPart(msgspec.Struct, tag_field="kind", tag="text", frozen=True):
    text: str


class ImagePart(msgspec.Struct, tag_field="kind", tag="image", frozen=True):
    data: str  # base64
    mime_type: str


class ThinkingPart(msgspec.Struct, tag_field="kind", tag="thinking", frozen=True):
    """Model reasoning. ``signature`` is the vendor's opaque proof (Anthropic) that must be
    sent back unchanged with the block; ``None`` when the vendor has none."""

    text: str
    signature: str | None = None


class RedactedThinkingPart(msgspec.Struct, tag_field="kind", tag="redacted_thinking", frozen=True):
    data: str


class ReasoningPart(msgspec.Struct, tag_field="kind", tag="reasoning", frozen=True):
    """A reasoning model's opaque reasoning item (the OpenAI Responses API's): sent back
    unchanged with the calls and results of its turn, so the model keeps its chain of
    thought across tool calls without any server-side state (``encrypted_content``).
    ``source`` is the provider that produced it (``openai:gpt-5``): no other model can read
    it, and providers without reasoning items (Chat Completions, Anthropic) ignore it.
    ``summary`` holds the summary texts the model gave with it (also streamed as thoughts)."""

    id: str
    encrypted_content: str
    summary: list[str] = []
    source: str = ""


class ToolCallPart(msgspec.Struct, tag_field="kind", tag="tool_call", frozen=True):
    call_id: str
    name: str
    arguments: dict[str, Any]


UserPart: TypeAlias = TextPart | ImagePart
AssistantPart: TypeAlias = (
    TextPart | ThinkingPart | RedactedThinkingPart | ReasoningPart | ToolCallPart
)


class UserMessage(msgspec.Struct, tag_field="role", tag="user", frozen=True):
    parts: list[UserPart]


class AssistantMessage(msgspec.Struct, tag_field="role", tag="assistant", frozen=True):
    parts: list[AssistantPart]


class ToolResultMessage(msgspec.Struct, tag_field="role", tag="tool", frozen=True):
    """The result of one tool call, fed back to the model."""

    call_id: str
    name: str
    parts: list[UserPart]
    is_error: bool = False


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool offered to the model: ``parameters`` is a JSON Schema object. ``grammar``
    (a Lark grammar) marks a tool whose input is free text (``apply_patch``'s patch):
    where the API has custom tools (OpenAI Responses) it is offered as one, its text
    arriving as the argument named by the schema's only property; elsewhere as the
    function ``parameters`` describe."""

    name: str
    description: str
    parameters: dict[str, Any]
    grammar: str | None = None


def estimate_tokens(messages: list[Message], system: str = "") -> int:
    """A rough token count (about four characters a token, plus the wrapping each part
    gets on the wire; an image counts as 400 characters): for deciding when to make room,
    never for billing."""
    return max(1, (len(system) + sum(map(message_chars, messages))) // 4)


def message_chars(m: Message) -> int:
    """What one message adds to :func:`estimate_tokens`, in characters (a session keeps
    the sum as its history grows: ``Session.history_tokens``)."""
    chars = 40 * len(m.parts) + 20  # the JSON each part and message is wrapped in
    for p in m.parts:
        if isinstance(p, TextPart | ThinkingPart):
            chars += len(p.text)
        elif isinstance(p, ToolCallPart):
            chars += len(p.name) + len(msgspec.json.encode(p.arguments))
        elif isinstance(p, ReasoningPart):
            chars += sum(map(len, p.summary)) + 400
        else:
            chars += 400
    return chars


# --------------------------------------------------------------------------- stubs


def stub_text(call: ToolCallPart | None, result: ToolResultMessage) -> str:
    """What an old tool result becomes when it is removed to make room: what it was and
    how to get it again (see ``engine.context``, which decides when)."""
    size = sum(len(p.text) for p in result.parts if isinstance(p, TextPart))
    what = result.name
    if call is not None and call.arguments:
        args = ", ".join(f"{k}={v!r}" for k, v in list(call.arguments.items())[:3])
        what = f"{result.name}({args[:200]})"
    return (
        f"[Earlier result of {what}: {size:,} characters, removed to make room in the "
        "context. Call the tool again if you need it.]"
    )


def stubbed(result: ToolResultMessage, call: ToolCallPart | None) -> ToolResultMessage:
    return ToolResultMessage(
        result.call_id, result.name, [TextPart(stub_text(call, result))], result.is_error
    )


def apply_stubs(history: list[Message], call_ids: set[str]) -> list[Message]:
    """``history`` with the results of ``call_ids`` replaced by their stubs (a pure
    transform: the session records it, a load replays it)."""
    calls = {
        p.call_id: p
        for m in history
        if isinstance(m, AssistantMessage)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    return [
        stubbed(m, calls.get(m.call_id))
        if isinstance(m, ToolResultMessage) and m.call_id in call_ids
        else m
        for m in history
    ]
