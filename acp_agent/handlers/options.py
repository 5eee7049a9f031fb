"""A session's modes and config options: what ``session/new`` (load, resume, fork)
advertises, ``session/set_mode`` and ``session/set_config_option``, and changes the agent
makes itself (``/plan``, ``/mode``, ``/model``).

The mode is offered twice, as the session's modes and as the ``mode`` config option, and
both always move together. ``thought_level`` is offered only for models that think.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..engine.modes import MODE_IDS, MODES
from ..errors import InvalidParams
from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from ..providers.pool import Models
    from ..sessions.session import Session
    from .services import Services

THINKING = ("off", "low", "medium", "high")


class Offering(Protocol):
    """What decides the choices offered: the models, and whether commands can be
    sandboxed here (``handlers.services.Services``; before it is loaded, what
    ``handlers.opening`` answers a new session from)."""

    @property
    def models(self) -> Models: ...
    @property
    def sandboxed(self) -> bool: ...


class Settings(Protocol):
    """A session's settings the options show (a ``Session``'s, or a new one's)."""

    @property
    def mode(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def thinking(self) -> str: ...
    @property
    def sandbox(self) -> str: ...


#: The ``sandbox`` option's values: the level ``auto`` runs commands at.
SANDBOX_LEVELS = [
    ("workspace-write", "Workspace write", "Commands write only inside the workspace; no network."),
    ("read-only", "Read-only", "Commands write nothing but temporary files; no network."),
    ("off", "Off", "Commands are not sandboxed: in auto mode they ask."),
]


def mode_ids(sv: Offering) -> list[str]:
    """The modes offered: ``auto`` only when commands can be sandboxed."""
    return [m for m in MODE_IDS if m != "auto" or sv.sandboxed]


def modes(sv: Offering, session: Settings) -> t.SessionModeState:
    offered = mode_ids(sv)
    return t.SessionModeState(
        current_mode_id=session.mode,
        available_modes=[
            t.SessionMode(id=i, name=n, description=d) for i, n, d in MODES if i in offered
        ],
    )


def config_options(sv: Offering, session: Settings) -> list[t.SessionConfigOption]:
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

    offered = mode_ids(sv)
    options: list[t.SessionConfigOption] = [
        select("mode", "Mode", session.mode, [m for m in MODES if m[0] in offered]),
        select("model", "Model", session.model, [(m, m, None) for m in _models(sv, session)]),
    ]
    if sv.models.model_info_for(session.model).supports_thinking:
        levels = [(v, v.capitalize(), None) for v in THINKING]
        options.append(select("thought_level", "Thinking", session.thinking, levels))
    if sv.sandboxed:
        options.append(select("sandbox", "Sandbox", session.sandbox, SANDBOX_LEVELS))
    return options


def _models(sv: Offering, session: Settings) -> list[str]:
    """The models offered: the configured ones, and the session's own (``/model`` may
    have chosen another)."""
    models = sv.models.choices
    return models if session.model in models else [*models, session.model]


def _allowed(sv: Offering, session: Settings) -> Mapping[str, list[str]]:
    allowed: dict[str, list[str]] = {"mode": mode_ids(sv), "model": _models(sv, session)}
    if sv.models.model_info_for(session.model).supports_thinking:
        allowed["thought_level"] = list(THINKING)
    if sv.sandboxed:
        allowed["sandbox"] = [v for v, _, _ in SANDBOX_LEVELS]
    return allowed


def mode_refusal(sv: Services, mode: str) -> str | None:
    """Why ``mode`` cannot be chosen here (``None``: it can)."""
    if mode in mode_ids(sv):
        return None
    if mode == "auto":
        why = sv.sandboxing.why_not()
        return f"mode 'auto' runs commands in a sandbox, and none works here: {why}"
    return f"unknown mode {mode!r}"


async def set_mode(sv: Services, p: t.SetSessionModeRequest) -> t.SetSessionModeResponse:
    session = sv.sessions.require(p.session_id)
    refusal = mode_refusal(sv, p.mode_id)
    if refusal is not None:
        raise InvalidParams(f"Invalid params: {refusal} - at `$.modeId`")
    session.set_mode(p.mode_id)
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(sv, session)))
    return t.SetSessionModeResponse()


async def set_config_option(
    sv: Services, p: t.SetSessionConfigOptionRequestAny
) -> t.SetSessionConfigOptionResponse:
    session = sv.sessions.require(p.session_id)
    allowed = _allowed(sv, session)
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
    elif p.config_id == "sandbox":
        session.set_sandbox(p.value)
    else:
        session.set_model(p.value)
    return t.SetSessionConfigOptionResponse(config_options=config_options(sv, session))


async def switch_mode(sv: Services, session: Session, mode: str) -> None:
    """An agent-initiated mode change: both the mode and the config option follow."""
    session.set_mode(mode)
    await session.emit(t.CurrentModeUpdate(current_mode_id=mode))
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(sv, session)))


async def switch_model(sv: Services, session: Session, model: str) -> None:
    session.set_model(model)
    await session.emit(t.ConfigOptionUpdate(config_options=config_options(sv, session)))
