"""``session/new`` answered at once; the session opened right after the answer.

The answer (the session's id, its modes, its config options) needs only the
configuration, the models and whether bubblewrap works here (``engine.probe``, whose
probe the agent starts at its start): all loaded for ``initialize``. Opening the session
(its log created, its command files and skills found, its MCP servers started) needs the
session stage (``handlers.services``, some 30 ms of imports on a small machine, under
way in the warm-up thread at that moment): :func:`answer` gives the answer and what
opening needs, and the method table (``handlers.agent``) opens the session in the
background once the answer is written (``lifecycle.open_new``). Every later request of
the connection waits for the openings under way before it runs, so none sees the session
half open: a prompt sent right after the answer runs in the opened session, a listing
lists it. The window this leaves: a process killed between the answer and the log's
creation (a few milliseconds) loses that session, which holds nothing yet.

The checks of a lifecycle request's roots and ``systemPrompt`` live here too: every
lifecycle request runs them before it creates or loads anything.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..engine.probe import answered
from ..errors import InvalidParams
from ..protocol import UnsetType
from ..protocol import types as t
from ..sessions.ids import new_session_id
from ..sessions.offers import ClientPrompt
from .auth import require_key
from .background import Background
from .options import config_options, modes

if TYPE_CHECKING:
    from ..config import Config
    from ..providers.pool import Models
    from .services import Services


class Fresh(msgspec.Struct, frozen=True):
    """A new session's settings: the configuration's defaults."""

    mode: str
    model: str
    thinking: str
    sandbox: str

    @classmethod
    def of(cls, config: Config) -> Fresh:
        return cls(config.default_mode, config.model, config.thinking, config.sandbox.level)


class NewSession(msgspec.Struct, frozen=True):
    """What opening an answered ``session/new`` needs."""

    session_id: str
    cwd: str
    directories: list[str]
    settings: Fresh
    prompt: ClientPrompt | None
    servers: Sequence[t.McpServerAny] | UnsetType


class _Offer(msgspec.Struct, frozen=True):
    models: Models
    sandboxed: bool


class Openings:
    """The sessions answered for and being opened, and the prompts waiting to run (for
    an opening, or for the turn stage to load) that a ``session/cancel`` must reach."""

    def __init__(self) -> None:
        self._opening = Background()
        self.ids: set[str] = set()
        """The sessions being opened (answered for, not yet open)."""
        self._last: asyncio.Task[None] | None = None
        self._arriving: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancelled: set[asyncio.Task[Any]] = set()

    def open(self, new: NewSession, services: Callable[[], Services]) -> None:
        """Open the session answered for, in a task (it runs after the answer is written)."""
        self.ids.add(new.session_id)
        task = self._opening.start(_open(new, services, self._last))
        task.add_done_callback(lambda _: self.ids.discard(new.session_id))
        self._last = task

    async def settled(self) -> None:
        """Wait until no session is being opened."""
        await self._opening.settled()

    async def arrive(self, session_id: str, services: Callable[[], Services]) -> None:
        """A prompt for ``session_id`` arrived: wait for the openings, then for the turn
        stage; a ``session/cancel`` of that session meanwhile makes its turn begin
        cancelled."""
        task = asyncio.current_task()
        assert task is not None
        waiting = self._arriving.setdefault(session_id, set())
        waiting.add(task)
        try:
            await self._opening.settled()
            await services().turns_ready()
        finally:
            waiting.discard(task)
            if not waiting:
                del self._arriving[session_id]
            cancelled = task in self._cancelled
            self._cancelled.discard(task)
        session = services().sessions.get(session_id) if cancelled else None
        if session is not None:
            session.cancel_task(task)

    def cancel(self, session_id: str) -> None:
        """A ``session/cancel``: the prompts of ``session_id`` waiting now are cancelled."""
        self._cancelled.update(self._arriving.get(session_id, ()))


async def _open(
    new: NewSession, services: Callable[[], Services], after: asyncio.Task[None] | None
) -> None:
    """Open ``new`` once the session answered for before it is open (in the order of the
    answers: what is told once goes to the first)."""
    if after is not None and not after.done():
        await asyncio.wait([after])
    sv = await asyncio.to_thread(services)  # the session stage, imported off the loop
    await sv.open_new(new)


async def answer(models: Models, p: t.NewSessionRequest) -> tuple[t.NewSessionResponse, NewSession]:
    """``session/new``'s answer, every check done (a key, the roots, the system prompt),
    and what opening the session needs."""
    config = models.config
    require_key(config)
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    found = await answered()  # (the probe started at start: its answer is usually in)
    offer = _Offer(models, found.program is not None)
    new = NewSession(new_session_id(), cwd, directories, Fresh.of(config), prompt, p.mcp_servers)
    response = t.NewSessionResponse(
        session_id=new.session_id,
        modes=modes(offer, new.settings),
        config_options=config_options(offer, new.settings),
    )
    return response, new


def client_prompt(value: t.SystemPrompt | UnsetType | None) -> ClientPrompt | None:
    """A lifecycle request's ``systemPrompt``, checked before anything is created:
    ``append`` and ``override`` of text blocks; anything else is -32602."""
    if value is None or isinstance(value, UnsetType):
        return None
    if value.mode not in ("append", "override"):
        raise InvalidParams(
            f"Invalid params: system prompt mode {value.mode!r} is not supported"
            " (append, override) - at `$.systemPrompt.mode`"
        )
    if not value.content:
        raise InvalidParams("Invalid params: an empty system prompt - at `$.systemPrompt.content`")
    texts: list[str] = []
    for i, block in enumerate(value.content):
        if not isinstance(block, t.TextContent):
            raise InvalidParams(
                f"Invalid params: system prompts take text blocks only, got {type(block).__name__}"
                f" - at `$.systemPrompt.content[{i}]`"
            )
        texts.append(block.text)
    return ClientPrompt(value.mode, "\n\n".join(texts).strip())


def roots(cwd: str, directories: list[str] | UnsetType) -> tuple[str, list[str]]:
    """Validate a lifecycle request's roots (before anything is created or loaded)."""
    check_path(cwd, "cwd", "`cwd` must be an absolute path")
    extra = [] if isinstance(directories, UnsetType) else directories
    for i, path in enumerate(extra):
        check_path(
            path,
            f"additionalDirectories[{i}]",
            "additional directories must be absolute paths",
        )
    return os.path.normpath(cwd), [os.path.normpath(path) for path in extra]


def check_path(path: str, field: str, rule: str) -> None:
    """A path from the client that will reach ``os`` calls: absolute, and no NUL byte
    (which every ``os`` call refuses)."""
    if "\0" in path:
        raise InvalidParams(f"Invalid params: a path must not contain NUL bytes - at `$.{field}`")
    if not path or not os.path.isabs(path):
        raise InvalidParams(f"Invalid params: {rule}, got {path!r} - at `$.{field}`")
