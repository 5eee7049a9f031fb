"""Steering: a message the client sends into a session's running turn.

The wire contract is the extension the ACP adapters for Claude Code
(``claude-agent-acp``) and Codex (``codex-acp``), and pi's (``pi-acp``), implement and
orchestrating clients already call; read from their sources and the clients that drive
them, matched field for field:

* request ``_session/steering``, params ``{sessionId, prompt: ContentBlock[]}``, with an
  optional ``_meta.steering.idleBehavior`` in the params;
* result ``{outcome: "injected"}`` (the message joins the running turn; the running
  ``session/prompt`` answers when the combined turn ends), ``{outcome: "startedNewTurn"}``
  (no turn was running: the message started one, streamed as usual; no request owns its
  end), ``{outcome: "promptRequired", reason: "noRunningTurn"}`` (no turn was running and
  the request said ``idleBehavior: "promptRequired"``: nothing started, nothing kept; the
  client sends a ``session/prompt`` it will own), or ``{outcome: "failed"}`` (the agent
  could not take it: an internal failure, logged);
* ``idleBehavior`` takes one value, ``"promptRequired"``; any other (or a ``_meta.steering``
  that is not an object) is -32602, so a client never mistakes an option the agent ignored
  for one it honoured;
* support is advertised in the ``initialize`` result's top-level ``_meta`` (a sibling of
  ``agentCapabilities``): ``{"steering": {"supported": true, "idleBehaviors":
  ["promptRequired"]}}``. Clients must read it, never probe: some agents answer an unknown
  method with ``{}``, which would read as acceptance. A client that never calls the method
  sees no steering traffic (the advertisement aside);
* bad input is refused as for ``session/prompt``: an unknown session -32002, a subagent's
  session, an empty prompt, content the model does not take (audio; images for a model
  without vision) -32602. Several steers in a row keep their order (each is placed before
  the next is read).

Here, what a steer does (``sessions/steers`` holds each turn's inbox): while a turn of the
session is registered and its engine still asks the model, the message is logged as sent
(``Steer``), then joins the conversation before the turn's next model request, after the
tool calls in flight finish (a model stream in progress is never cut): it is shown then,
as ``user_message_chunk`` updates under its own ``messageId`` (logged, so ``session/load``
replays it in its place), and added to the history as a user message. If the model ends
its turn while a message is pending, the turn makes one more request. Once the engine has
stopped asking, the turn takes no more: a later message starts the next turn (queued
behind the ending one) or, with ``promptRequired``, is handed back. A turn that stops
otherwise (cancelled, an error, a limit, a refusal, a slash command's answer) keeps what
is pending in the history marked as not acted upon (shown too), so the next request is
valid on every provider. A steer is never a slash command; the turn it starts may be one.

ACP is discussing the same behaviour as a standard method, ``session/inject`` (RFD
agent-client-protocol#1261, draft schema #2043): content plus a ``queue`` or ``steer``
mode, an agent-owned message id in the result, delivery echoed as a user message. It is
not in the pinned schema; :func:`steer` is the seam it can reuse (mode ``steer``, with
``start_when_idle``): it answers a :class:`Steered`, whose ``message_id`` is the
agent-owned id such a method returns; ``_session/steering`` maps it to its outcomes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import log
from ..conversation import UserMessage
from ..errors import AcpError, InvalidParams
from ..protocol import steering as wire
from ..protocol import types as t
from ..sessions.steers import PendingSteer, accept, target
from .lifecycle import take_over
from .prompting import check, run_prompt, settle_unrun, user_parts

if TYPE_CHECKING:
    from ..sessions.session import Session
    from .services import Services


@dataclass(frozen=True, slots=True)
class Steered:
    """What became of a steer: ``injected``, ``startedNewTurn`` or ``promptRequired``, and
    the message's id when the agent kept it (its ``user_message_chunk``s', or the
    ``Prompt``'s of the turn it started)."""

    outcome: str
    message_id: str | None = None


_ANSWERS = {
    "injected": wire.INJECTED,
    "startedNewTurn": wire.STARTED_NEW_TURN,
    "promptRequired": wire.NO_RUNNING_TURN,
}


async def steering(sv: Services, p: wire.SteeringRequest) -> wire.SteeringResponse:
    """``_session/steering``."""
    start = idle_behavior(p.meta) is None
    try:
        steered = await steer(sv, p.session_id, p.prompt, start_when_idle=start)
        return _ANSWERS[steered.outcome]
    except AcpError:
        raise
    except Exception:  # a bug: the log has the traceback; the client an answer it knows
        log.exception("steering failed", session_id=p.session_id)
        return wire.FAILED


def idle_behavior(meta: dict[str, Any] | object) -> str | None:
    """The request's ``_meta.steering.idleBehavior`` (``None``: start a turn)."""
    steering = meta.get("steering") if isinstance(meta, dict) else None
    if steering is None:
        return None
    if not isinstance(steering, dict):
        raise InvalidParams("Invalid params: `_meta.steering` must be an object",
                            {"path": "$._meta.steering"})  # fmt: skip
    value = steering.get("idleBehavior")
    if value is None or value == wire.PROMPT_REQUIRED:
        return value
    raise InvalidParams(
        f"Invalid params: unknown `_meta.steering.idleBehavior` {value!r}; the one supported"
        f" is {wire.PROMPT_REQUIRED!r}",
        {"path": "$._meta.steering.idleBehavior", "supported": [wire.PROMPT_REQUIRED]},
    )


async def steer(
    sv: Services, session_id: str, blocks: list[t.ContentBlock], *, start_when_idle: bool
) -> Steered:
    """Put ``blocks`` into ``session_id``'s running turn, or start a turn with them
    (``start_when_idle``), or hand them back. Everything from reading the session's
    turns to placing the message happens in one step (no ``await``), so messages keep
    the order they arrived in."""
    session = sv.sessions.require(session_id)
    if not blocks:
        raise InvalidParams("Invalid params: the prompt is empty - at `$.prompt`")
    images = sv.models.model_info_for(session.model).supports_images
    check(blocks, images=images)
    turn = target(session)
    if turn is None and start_when_idle and session.read_only:
        await take_over(sv, session)  # as a prompt would (-32600 if another process has it)
        turn = target(session)  # a turn may have started meanwhile
    if turn is None and not start_when_idle:
        return Steered("promptRequired")
    parts = user_parts(blocks, images=images)
    message = PendingSteer(session.new_message_id(), blocks, UserMessage(parts))
    if turn is not None:
        accept(session, turn, message)
        return Steered("injected", message.message_id)
    start_turn(sv, session, message)
    return Steered("startedNewTurn", message.message_id)


def start_turn(sv: Services, session: Session, first: PendingSteer) -> None:
    """A turn whose prompt is ``first``, registered now (so the next message joins it),
    run when the session's turns before it are done; its answer goes to no request
    (failures are logged)."""
    task = sv.background.start(_started(sv, session))  # it has not run yet
    turn = session.begin_turn(task)
    accept(session, turn, first)

    def never_ran(done: asyncio.Future[Any]) -> None:
        if turn in session.turns:  # cancelled before its first step
            session.end_turn(turn)
            settle_unrun(sv, session, turn)

    task.add_done_callback(never_ran)


async def _started(sv: Services, session: Session) -> None:
    turn = session.current_turn()
    assert turn is not None, "start_turn registers the task before it runs"
    response = await run_prompt(sv, session, turn, None)
    log.info("a turn a steer started ended", session_id=session.id,
             stop_reason=response.stop_reason)  # fmt: skip
