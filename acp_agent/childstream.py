"""Session-directed messages between a subagent and its parent, streamed as chunks.

Each view of a message (outgoing on the sender's transcript, incoming on the
recipient's) is a ``session_message`` carrying the participants and the link to the
other view, then its content as ``session_message_chunk``\\ s of at most
:data:`MESSAGE_CHUNK_CHARS` characters (cut after a line end when there is one): a long
answer never goes out as one huge notification, and a client renders it as it arrives.
Only clients with ``clientCapabilities.subagents`` see any of it (the same capability
gates ``subagent_update``, ``session_message`` and ``session_message_chunk``).
"""

from __future__ import annotations

from .protocol import types as t
from .session import Session

#: The most text one ``session_message_chunk`` carries.
MESSAGE_CHUNK_CHARS = 2048

async def send_message(sender: Session, recipient: Session, text: str) -> None:
    """A session-directed message: the outgoing view on the sender's transcript, then
    the incoming view on the recipient's, each with its own id and linked to the other,
    each an upsert then its content in chunks."""
    sent, received = sender.new_message_id(), recipient.new_message_id()
    pieces = split(text)
    await sender.emit(
        t.SessionMessage(
            message_id=sent,
            sender_session_id=sender.id,
            recipient_session_id=recipient.id,
            recipient_message_id=received,
        )
    )
    for piece in pieces:
        await sender.emit(t.SessionMessageChunk(message_id=sent, content=t.TextContent(text=piece)))
    await recipient.emit(
        t.SessionMessage(
            message_id=received,
            sender_session_id=sender.id,
            recipient_session_id=recipient.id,
            sender_message_id=sent,
        )
    )
    for piece in pieces:
        await recipient.emit(
            t.SessionMessageChunk(message_id=received, content=t.TextContent(text=piece))
        )


def split(text: str, limit: int = MESSAGE_CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, each cut after a newline when
    one lies in its second half; never an empty piece (one for an empty text)."""
    out: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", limit // 2, limit) + 1 or limit
        out.append(text[:cut])
        text = text[cut:]
    if text or not out:
        out.append(text)
    return out
