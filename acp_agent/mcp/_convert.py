"""MCP content -> ACP content blocks (for the editor) and text + images (for the model).

Runs only once the SDK is loaded; ``mcp.types`` is imported inside the functions so that
``import acp_agent.mcp`` stays free of it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from ..conversation import ImagePart
from ..errors import ToolError
from ..protocol import types as t
from ..tools.base import ToolOutput

if TYPE_CHECKING:
    from mcp.types import CallToolResult, GetPromptResult
    from mcp.types import ContentBlock as McpBlock

#: Characters of tool text the model gets; head and tail are kept past it.
TEXT_LIMIT = 100_000


def acp_block(block: McpBlock) -> t.ContentBlock:
    """One MCP content block as the matching ACP content block."""
    # the MCP SDK (heavy): only once a server is configured
    import mcp.types as m

    if isinstance(block, m.TextContent):
        return t.TextContent(text=block.text)
    if isinstance(block, m.ImageContent):
        return t.ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, m.AudioContent):
        return t.AudioContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, m.ResourceLink):
        return t.ResourceLink(
            name=block.name,
            uri=block.uri,
            title=block.title if block.title is not None else UNSET,
            description=block.description if block.description is not None else UNSET,
            mime_type=block.mime_type if block.mime_type is not None else UNSET,
            size=block.size if block.size is not None else UNSET,
        )
    resource = block.resource
    mime = resource.mime_type if resource.mime_type is not None else UNSET
    if isinstance(resource, m.TextResourceContents):
        inner = t.EmbeddedResourceResourceAny(uri=resource.uri, mime_type=mime, text=resource.text)
    else:
        inner = t.EmbeddedResourceResourceAny(uri=resource.uri, mime_type=mime, blob=resource.blob)
    return t.EmbeddedResource(resource=inner)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def model_view(block: t.ContentBlock) -> tuple[str | None, ImagePart | None]:
    """What the model gets for one block: a piece of text and/or an image."""
    if isinstance(block, t.TextContent):
        return block.text, None
    if isinstance(block, t.ImageContent):
        return None, ImagePart(data=block.data, mime_type=block.mime_type)
    if isinstance(block, t.AudioContent):
        return f"[audio ({block.mime_type}) not shown]", None
    if isinstance(block, t.ResourceLink):
        line = f"[resource link: {block.name} <{block.uri}>"
        if mime := _str(block.mime_type):
            line += f" ({mime})"
        if description := _str(block.description):
            line += f": {description}"
        return line + "]", None
    res = block.resource
    mime = _str(res.mime_type)
    if (text := _str(res.text)) is not None:
        return f"[resource {res.uri}]\n{text}", None
    blob = _str(res.blob) or ""
    if mime and mime.startswith("image/"):
        return f"[image resource {res.uri}]", ImagePart(data=blob, mime_type=mime)
    size = len(blob) * 3 // 4
    return f"[binary resource {res.uri} ({mime or 'unknown type'}, {size} bytes)]", None


def _bound(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[len(text) - limit // 2 :]
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n[... {omitted} characters omitted ...]\n{tail}"


def tool_output(result: CallToolResult, *, limit: int = TEXT_LIMIT) -> ToolOutput:
    """A tool result as a :class:`ToolOutput`; an ``isError`` result raises :class:`ToolError`."""
    blocks = [acp_block(b) for b in result.content]
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in blocks:
        text, image = model_view(block)
        if text is not None:
            texts.append(text)
        if image is not None:
            images.append(image)
    structured = result.structured_content
    if not texts and structured is not None:
        # Spec: tools with structured output SHOULD also send it as text; some don't.
        texts.append(json.dumps(structured, ensure_ascii=False, indent=2))
        blocks.append(t.TextContent(text=texts[-1]))
    text = "\n".join(texts)
    if result.is_error:
        raise ToolError(_bound(text, limit) or "the tool reported an error")
    if not text:
        text = f"({len(images)} image(s))" if images else "(no output)"
    raw: Any = structured
    return ToolOutput(
        text=_bound(text, limit),
        content=[t.Content(content=b) for b in blocks],
        raw_output=raw,
        images=images,
    )


def prompt_content(result: GetPromptResult) -> list[t.ContentBlock]:
    """A prompt's messages, flattened in order. When the prompt is not all ``user``
    messages, each message is introduced by a ``[role]`` text block."""
    plain = all(msg.role == "user" for msg in result.messages)
    out: list[t.ContentBlock] = []
    for msg in result.messages:
        if not plain:
            out.append(t.TextContent(text=f"[{msg.role}]"))
        out.append(acp_block(msg.content))
    return out
