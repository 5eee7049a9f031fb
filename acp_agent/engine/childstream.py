"""What an exposed subagent shows, beyond its own turn: its stream kept for replay, and
the session-directed messages between it and its parent, streamed as chunks.

**Kept.** A child has no log of its own (children are not sessions the client can list,
load or resume). Every update its stream shows is appended to its top-level session's
log as a :class:`~acp_agent.sessions.records.ChildUpdate` under the child's id, in the order it
happened, interleaved with the parent's own records: a grandchild's too (under its own
id; its announcement is on its parent's, the child's, stream). Consecutive text chunks of
one message are coalesced into one record (flushed by the child's next update, every
:data:`~acp_agent.sessions.store.FLUSH_CHARS` characters, and when the child goes idle); usage
updates and notices are live only. ``transcript.transcripts`` brings them back.

**Messages.** Each view of a message (outgoing on the sender's transcript, incoming on
the recipient's) is a ``session_message`` carrying the participants and the link to the
other view, then its content as ``session_message_chunk``\\ s of at most
:data:`MESSAGE_CHUNK_CHARS` characters (cut after a line end when there is one): a long
answer never goes out as one huge notification, and a client renders it as it arrives.
Only clients with ``clientCapabilities.subagents`` see any of it (the same capability
gates ``subagent_update``, ``session_message`` and ``session_message_chunk``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

from ..client import Client
from ..protocol import UNSET
from ..protocol import types as t
from ..sessions.records import ChildUpdate
from ..sessions.session import Session
from ..sessions.store import FLUSH_CHARS

#: The most text one ``session_message_chunk`` carries.
MESSAGE_CHUNK_CHARS = 2048

_Chunk = t.AgentMessageChunk | t.AgentThoughtChunk


class ChildLog:
    """An exposed child's stream, kept in its top-level session's log."""

    __slots__ = ("_chunks", "_session", "_size")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._chunks: list[_Chunk] = []
        self._size = 0

    def stream(self, client: Client) -> Callable[[str, t.SessionUpdate], Awaitable[None]]:
        """The child's ``emit_fn``: each update kept, then sent to the client."""

        async def emit(session_id: str, update: t.SessionUpdate) -> None:
            self.record(update)
            await client.session_update(session_id, update)

        return emit

    def record(self, update: t.SessionUpdate) -> None:
        if isinstance(update, t.UsageUpdate | t.Notice):
            return  # state and advisories: the live stream only
        if isinstance(update, _Chunk) and isinstance(update.content, t.TextContent) and _plain(
            update
        ):
            last = self._chunks[-1] if self._chunks else None
            if last is not None and (type(last), last.message_id) != (
                type(update),
                update.message_id,
            ):
                self.flush()
            self._chunks.append(update)
            self._size += len(update.content.text)
            if self._size >= FLUSH_CHARS:
                self.flush()
            return
        self.flush()
        self._write(update)

    def flush(self) -> None:
        """Write the buffered chunks of the message streaming now as one record."""
        chunks, self._chunks, self._size = self._chunks, [], 0
        if chunks:
            text = "".join(c.content.text for c in chunks if isinstance(c.content, t.TextContent))
            self._write(msgspec.structs.replace(chunks[0], content=t.TextContent(text=text)))

    def _write(self, update: t.SessionUpdate) -> None:
        log = self._session.root.log
        if log is not None:  # an unsaved session keeps nothing of its children either
            log.append(ChildUpdate(session_id=self._session.id, update=update))


def _plain(chunk: _Chunk) -> bool:
    """A chunk that coalesces: plain text, no annotations or metadata, with an id."""
    content = chunk.content
    return (
        type(content) is t.TextContent
        and content.annotations is UNSET
        and chunk.meta is UNSET
        and isinstance(chunk.message_id, str)
    )


async def send_message(sender: Session, recipient: Session, text: str) -> None:
    """A session-directed message: the outgoing view on the sender's transcript, then
    the incoming view on the recipient's, each with its own id and linked to the other,
    each an upsert then its content in chunks."""
    sent, received = sender.new_message_id(), recipient.new_message_id()
    views = (
        (sender, t.SessionMessage(
            message_id=sent, sender_session_id=sender.id, recipient_session_id=recipient.id,
            recipient_message_id=received)),
        (recipient, t.SessionMessage(
            message_id=received, sender_session_id=sender.id, recipient_session_id=recipient.id,
            sender_message_id=sent)),
    )  # fmt: skip
    pieces = split(text)
    for session, upsert in views:
        await session.emit(upsert)
        for piece in pieces:
            content = t.TextContent(text=piece)
            await session.emit(t.SessionMessageChunk(message_id=upsert.message_id, content=content))


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
