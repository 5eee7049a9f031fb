"""A session's modes and config options: what ``session/new`` (load, resume, fork)
advertises, ``session/set_mode`` and ``session/set_config_option``, and changes the agent
makes itself (``/plan``, ``/mode``, ``/model``).

The mode is offered twice, as the session's modes and as the ``mode`` config option, and
both always move together. ``thought_level`` is offered only for models that think.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..engine.permissions import MODE_IDS, MODES
from ..errors import InvalidParams
from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from ..sessions.session import Session
    from .runtime import Runtime

THINKING = ("off", "low", "medium", "high")


def modes(session: Session) -> t.SessionModeState:
    return t.SessionModeState(
        current_mode_id=session.mode,
        available_modes=[t.SessionMode(id=i, name=n, description=d) for i, n, d in MODES],
    )


def config_options(rt: Runtime, session: Session) -> list[t.SessionConfigOption]:
    def select(
        id: str, name: str, value: str, choices: Sequence[tuple[str, str, str | None]]
    ) -> t.SessionConfigSelect:
        return t.SessionConfigSelect(
            id=id,
            name=name,
            category=id,
            current_value=value,
            options=[
                t.SessionConfigSelectOptionsItemAny(value=v, name=n, description=d or UNSET)
                for v, n, d in choices
            ],
        )

    options: list[t.SessionConfigOption] = [
        select("mode", "Mode", session.mode, list(MODES)),
        select("model", "Model", session.model, [(m, m, None) for m in rt.models]),
    ]
    if rt.model_info_for(session.model).supports_thinking:
        levels = [(v, v.capitalize(), None) for v in THINKING]
        options.append(select("thought_level", "Thinking", session.thinking, levels))
    return options


def _allowed(rt: Runtime, session: Session) -> Mapping[str, list[str]]:
    allowed: dict[str, list[str]] = {"mode": MODE_IDS, "model": rt.models}
    if rt.model_info_for(session.model).supports_thinking:
        allowed["thought_level"] = list(THINKING)
    return allowed


async def set_mode(rt: Runtime, p: t.SetSessionModeRequest) -> t.SetSessionModeResponse:
    session = rt.session(p.session_id)
    if p.mode_id not in MODE_IDS:
        raise InvalidParams(f"Invalid params: unknown mode {p.mode_id!r} - at `$.modeId`")
    session.set_mode(p.mode_id)
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(rt, session)))
    return t.SetSessionModeResponse()


async def set_config_option(
    rt: Runtime, p: t.SetSessionConfigOptionRequestAny
) -> t.SetSessionConfigOptionResponse:
    session = rt.session(p.session_id)
    allowed = _allowed(rt, session)
    if p.config_id not in allowed:
        raise InvalidParams(
            f"Invalid params: unknown config option {p.config_id!r} - at `$.configId`"
        )
    if not isinstance(p.value, str) or p.value not in allowed[p.config_id]:
        raise InvalidParams(
            f"Invalid params: {p.value!r} is not a value of {p.config_id!r} - at `$.value`"
        )
    if p.config_id == "mode":
        session.set_mode(p.value)
        await session.emit(t.CurrentModeUpdate(current_mode_id=p.value))
    elif p.config_id == "thought_level":
        session.set_thinking(p.value)
    else:
        session.set_model(p.value)
    return t.SetSessionConfigOptionResponse(config_options=config_options(rt, session))


async def switch_mode(rt: Runtime, session: Session, mode: str) -> None:
    """An agent-initiated mode change: both the mode and the config option follow."""
    session.set_mode(mode)
    await session.emit(t.CurrentModeUpdate(current_mode_id=mode))
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(rt, session)))


async def switch_model(rt: Runtime, session: Session, model: str) -> None:
    session.set_model(model)
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(rt, session)))
