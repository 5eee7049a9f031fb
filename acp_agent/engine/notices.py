"""Telling the user something outside the conversation: a ``notice`` where the client
advertised notices (never recorded, never replayed), else, when it matters, an ordinary
agent message (recorded like any other)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from ..client import Client
    from ..sessions.session import Session


def _session_caps(client: Client) -> t.ClientSessionCapabilities | None:
    caps = client.capabilities.session
    return caps if isinstance(caps, t.ClientSessionCapabilities) else None


def shows_notices(client: Client) -> bool:
    caps = _session_caps(client)
    return caps is not None and isinstance(caps.notices, t.NoticeCapabilities)


def shows_compaction(client: Client) -> bool:
    caps = _session_caps(client)
    return caps is not None and isinstance(caps.compaction, t.CompactionCapabilities)


async def notify(
    client: Client,
    session: Session,
    severity: str,
    title: str,
    description: str | None = None,
    *,
    fallback: bool = False,
) -> None:
    """A live advisory: a ``notice`` where ``client`` advertised notices; otherwise, with
    ``fallback``, an agent message."""
    if shows_notices(client):
        await session.emit_fn(  # not recorded; a hidden subagent's goes nowhere
            session.id,
            t.Notice(severity=severity, title=title, description=description or UNSET),
        )
    elif fallback:
        await session.say(f"**{title}**" + (f": {description}" if description else ""))
