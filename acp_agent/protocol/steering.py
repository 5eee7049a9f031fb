"""The ``_session/steering`` extension's wire types (not in the ACP schema; see
``handlers/steering.py`` for the contract and where it comes from).

Light on purpose: the method table names these types when it is built, before
``initialize`` is answered.
"""

from __future__ import annotations

from typing import Any, Final

from ._base import UNSET, UnsetType, Wire
from .types import ContentBlock, SessionId

METHOD: Final = "_session/steering"

#: The only ``_meta.steering.idleBehavior`` a request may name.
PROMPT_REQUIRED: Final = "promptRequired"

#: What ``initialize`` advertises in its result's top-level ``_meta`` (a sibling of
#: ``agentCapabilities``, where the peers put it and their clients look).
ADVERTISED: Final[dict[str, Any]] = {
    "steering": {"supported": True, "idleBehaviors": [PROMPT_REQUIRED]}
}


class SteeringRequest(Wire):
    """``{sessionId, prompt, _meta?: {steering?: {idleBehavior?}}}``."""

    session_id: SessionId
    prompt: list[ContentBlock]


class SteeringResponse(Wire):
    """``{outcome}``: ``injected``, ``startedNewTurn`` or ``failed``; or
    ``{outcome: "promptRequired", reason: "noRunningTurn"}``."""

    outcome: str
    reason: str | UnsetType = UNSET


INJECTED: Final = SteeringResponse(outcome="injected")
STARTED_NEW_TURN: Final = SteeringResponse(outcome="startedNewTurn")
NO_RUNNING_TURN: Final = SteeringResponse(outcome=PROMPT_REQUIRED, reason="noRunningTurn")
FAILED: Final = SteeringResponse(outcome="failed")
