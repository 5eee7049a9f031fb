"""A turn's world: everything one turn needs, built once before it starts (by
``handlers.turns``) and handed down to the engine, which never reaches back up.

:class:`TurnContext` carries the session, the editor as this session sees it
(:class:`Client`), the provider (already behind ``providers.resilient``), the model's
facts, the toolset, the permission rules, the system prompt, the limits, and the
environment of the commands tools start. :func:`request_of` turns it into the next
model request; :func:`window` is the context window the turn works within.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..conversation import ToolCallPart
from ..providers.base import ModelProvider, ModelRequest
from ..providers.models import ModelInfo
from .context import context_estimate
from .permissions import Rules
from .projectrules import Nested

if TYPE_CHECKING:
    from ..client import Client
    from ..sessions.session import Session
    from ..sessions.steers import Steers
    from ..tools.base import Toolset
    from ..tools.usershell import LoginEnvironment
    from ..tools.webfetch import WebSettings
    from .sandboxing import Sandboxing

THINKING_LEVELS = ("off", "low", "medium", "high")
#: The least an answer is given, however full the context (then the window decides).
MIN_ANSWER_TOKENS = 1_024
#: The room an answer should have: when the context leaves less, it is compacted first
#: (rather than the answer's budget shrinking); at most the model's output limit and a
#: quarter of the window.
ANSWER_RESERVE = 8_192


def _by_the_user() -> str | None:
    return None


class ChangeRecorder(Protocol):
    """What the turn engine tells ``checkpoints.Recorder``."""

    async def before_change(self, paths: Sequence[str], *, snapshot: bool = True) -> None: ...


@dataclass(frozen=True, slots=True)
class TurnLimits:
    max_turn_requests: int = 50
    prompt_cache: bool = True
    """Ask the provider to cache the prompt's prefix (keyed by the session's id)."""
    prune_at: float = 0.6
    """Share of the window past which old large tool results become stubs."""
    compact_at: float = 0.85
    """Share of the window past which the conversation is compacted."""


@dataclass(slots=True)
class TurnContext:
    """One turn's world. Subagents get their own (their session, their view of the
    editor), built by the same factory."""

    session: Session
    client: Client
    provider: ModelProvider
    model: ModelInfo
    tools: Toolset
    rules: Rules
    system: str
    limits: TurnLimits = field(default_factory=TurnLimits)
    env: Mapping[str, str] | None = None
    """The environment of the commands tools start (the agent's, without its secrets)."""
    sandboxing: Sandboxing | None = None
    """The command sandbox (``None``: commands run unfenced)."""
    login_env: Callable[[], Awaitable[LoginEnvironment]] | None = None
    """The session's login-shell environment, read on first use (``tools.usershell``)."""
    web: WebSettings | None = None
    """What web_fetch may do (``None``: web access is off)."""
    nested: Nested | None = None
    """The session's instruction files below its directory, each attached to the first
    tool result touching a path under it (``projectrules``)."""
    outputs: str | None = None
    """Where cut command outputs are saved whole (the session's, under the state
    directory); ``None``: not saved."""
    checkpoint: ChangeRecorder | None = None
    """Records what the turn is about to change (``checkpoints``: the top-level turn's
    recorder, a subagent's too); ``None``: checkpoints are off."""
    interrupted_by: Callable[[], str | None] = _by_the_user
    """While the turn unwinds from a cancellation: why, when it was not the user (the turn
    ran out of time), for the tool calls and the history it leaves behind."""
    steers: Steers | None = None
    """The messages the client sends into the turn while it runs (``_session/steering``):
    each joins before the next model request (subagents' turns take none)."""


@dataclass(slots=True)
class PendingCall:
    """A tool call the model made; ``error`` when its arguments were not valid JSON;
    ``tool_call_id`` when the client was shown it while the answer streamed."""

    part: ToolCallPart
    error: str | None = None
    tool_call_id: str | None = None


def window(ctx: TurnContext) -> int:
    """The context window: the model's, or less when the server said so during the
    session (a context-length error naming its limit)."""
    limit = ctx.session.window_limit
    return min(ctx.model.context_window, limit) if limit else ctx.model.context_window


def answer_room(ctx: TurnContext) -> int:
    """What the window leaves for the answer after the context (the estimate is rough)."""
    return window(ctx) - context_estimate(ctx.session) * 6 // 5 - 256


def answer_reserve(ctx: TurnContext) -> int:
    """The room an answer should have (see :data:`ANSWER_RESERVE`)."""
    return min(ctx.model.max_output_tokens, ANSWER_RESERVE, window(ctx) // 4)


def request_of(ctx: TurnContext) -> ModelRequest:
    """The next model request of the turn: the session's history as it stands."""
    session = ctx.session
    thinking = session.thinking if session.thinking in THINKING_LEVELS else "off"
    if not ctx.model.supports_thinking:
        thinking = "off"  # never sent to a model that rejects it
    room = answer_room(ctx)  # never ask for more than is left
    return ModelRequest(
        system=ctx.system,
        messages=list(session.history),
        tools=ctx.tools.specs(),  # the same in every mode: refusals are the policy's
        thinking=thinking,  # type: ignore[arg-type]
        max_tokens=max(MIN_ANSWER_TOKENS, min(ctx.model.max_output_tokens, room)),
        cache_key=session.id if ctx.limits.prompt_cache else None,
        history_cache=session.history_cache,
    )
