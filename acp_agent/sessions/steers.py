"""Messages a client sends into a running turn (steering): each turn's inbox, and how a
message joins the conversation or is kept as not acted upon.

A turn's :class:`Steers` accepts messages from the moment the turn is registered (queued
or running) until its engine stops asking the model (or it is cancelled); what is still
pending then is settled by :func:`settle`, never dropped. :func:`target` is the turn a
new message goes to: the first registered turn that still accepts (the running one,
else the next queued), so several messages keep their order.

In the log a message is a :class:`~.records.Steer` when accepted, then, under the same
message id, the ``Prompt`` of the turn it started, or the ``user_message_chunk`` updates
shown where it joined the conversation (:func:`join`, :func:`settle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..conversation import TextPart, UserMessage
from ..protocol import types as t
from .records import Steer, now_iso

if TYPE_CHECKING:
    from .session import Session, Turn

#: Heads a message the model never read, kept in its history (a cancel, an error, a stop
#: other than the model's own end of the turn came first).
NOT_ACTED_UPON = (
    "[Not acted upon: the user sent this while the previous turn was running, and that "
    "turn stopped before it was read.]"
)


@dataclass(frozen=True, slots=True)
class PendingSteer:
    """One message: its id, the blocks as the client sent them, what the model reads."""

    message_id: str
    blocks: list[t.ContentBlock]
    message: UserMessage


class Steers:
    """One turn's inbox."""

    __slots__ = ("accepting", "pending")

    def __init__(self) -> None:
        self.accepting = True
        self.pending: list[PendingSteer] = []

    def take(self) -> list[PendingSteer]:
        """The pending messages, in order, and none left."""
        taken, self.pending = self.pending, []
        return taken

    def close(self) -> None:
        """Accept nothing more (what is pending stays, for :func:`settle`)."""
        self.accepting = False


def target(session: Session) -> Turn | None:
    """The turn a message sent now joins, if any accepts one."""
    return next(
        (turn for turn in session.turns if turn.steers.accepting and not turn.cancel_requested),
        None,
    )


def accept(session: Session, turn: Turn, steer: PendingSteer) -> None:
    """``steer`` is ``turn``'s now: logged as sent, pending until the turn's next request."""
    if session.log is not None:
        session.log.append(Steer(message_id=steer.message_id, blocks=steer.blocks, at=now_iso()))
    turn.steers.pending.append(steer)


def chunks(steer: PendingSteer) -> list[t.SessionUpdate]:
    """How the client is shown ``steer``: its blocks as ``user_message_chunk``s."""
    return [t.UserMessageChunk(content=b, message_id=steer.message_id) for b in steer.blocks]


async def join(session: Session, steer: PendingSteer) -> None:
    """``steer`` joins the conversation: shown (and logged) here, and in history."""
    for update in chunks(steer):
        await session.emit(update)
    session.add_message(steer.message)


async def settle(session: Session, steers: Steers) -> None:
    """The turn is over: nothing more joins it; what is still pending is shown and kept in
    history as not acted upon (the next request stays valid: a user message after the
    turn's last, which every provider accepts)."""
    steers.close()
    for steer in steers.take():
        for update in chunks(steer):
            await session.emit(update)
        session.add_message(UserMessage([TextPart(NOT_ACTED_UPON), *steer.message.parts]))
