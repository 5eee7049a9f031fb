"""The process edge: wires stdio, the connection and the agent together, runs until
stdin closes, and warms what the first prompt will need.

Warm-up happens here, not in a registry that happens to be imported early: once the
``initialize`` reply is written (or, for a client that never sends ``initialize``, after
the first session response), a worker thread imports the late-loaded handlers
(``handlers.services``: what opens a session, and a turn needs) and opens the session
index; once the first session is open (or a moment later) it imports the
turn engine, the tools and the configured model's SDK and provider; then the provider
readies its first request (``handlers.warmup``), and each session opened has its
connection to the model's server opened (``connect-ahead``). No other model's SDK is
imported; a remote model's TLS context is built beside the imports (``providers._http``).
While the thread imports,
the interpreter switches threads every :data:`WARM_SWITCH_INTERVAL` seconds rather than
5 ms, so the event loop stays responsive.

``ACP_AGENT_COALESCE_CHUNKS=1`` lets the connection merge the text of message and thought
chunks of one message that are sent within one turn of the event loop (all that one read
from the model brought) into one ``session/update``: fewer, longer lines for clients that
pay per message; the first chunk of a burst waits for nothing (see :func:`merge_chunks`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import IMPORTING
from .client import ClientProxy
from .config import Config
from .engine.probe import known, start_probe
from .handlers.agent import Agent
from .handlers.reload import on_signal
from .protocol import UNSET
from .protocol import types as t
from .rpc.connection import Connection, Route
from .rpc.framing import open_stdio

COALESCE_ENV = "ACP_AGENT_COALESCE_CHUNKS"
WARM_SWITCH_INTERVAL = 0.0005
WARM_GRACE = 0.1

#: What every first prompt needs besides the session handlers, whatever the model: the
#: turn stage (``handlers.turnstage``, the second late-loaded boundary) and the tools
#: (after the first session response, with the model's SDK).
WARM_MODULES = ("acp_agent.handlers.turnstage", "acp_agent.tools")


def warm(
    config: Config,
    opened: threading.Event,
    params: Iterable[type] = (),
    late: Callable[[], None] = lambda: None,
) -> None:
    """Import what the first prompt needs (call from a worker thread): ``late`` (the
    late-loaded handlers and what they stand on, built, and the session index opened:
    what opens a session) and msgspec's decoding plans for ``params`` (the
    methods' parameter types; built on a type's first decoding otherwise), then, once a
    session is open (``opened``, set after its response) or after :data:`WARM_GRACE`
    seconds, the configured model's SDK and the tools' schemas: an editor's
    ``session/new`` right after ``initialize`` never shares the processor with them."""
    import msgspec

    from .providers import spec

    family = spec(config.provider)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(WARM_SWITCH_INTERVAL)
    try:
        with IMPORTING:  # (one import at a time: acp_agent.IMPORTING)
            late()
        for type_ in params:
            msgspec.json.Decoder(type_)  # the plan is kept on the type
        opened.wait(WARM_GRACE)
        if family.remote:  # its SDK client's TLS context, built beside the SDK's import
            with IMPORTING:
                from .providers import _http

                _http.start()
        for module in (*WARM_MODULES, *family.warm):
            with IMPORTING:
                importlib.import_module(module)
        with IMPORTING:
            from .tools import builtin_tools

            for tool in builtin_tools().tools():
                tool.spec  # noqa: B018 (imports each tool and builds its JSON Schema once)
    finally:
        sys.setswitchinterval(interval)


class _Texts:
    """Chunks being merged: the first one's notification and every text so far."""

    __slots__ = ("first", "texts")

    def __init__(self, first: t.SessionNotification, texts: list[str]) -> None:
        self.first = first
        self.texts = texts


def _plain_text(n: t.SessionNotification) -> str | None:
    """The text of a message or thought chunk with nothing but text, else ``None``."""
    u = n.update
    if type(u) not in (t.AgentMessageChunk, t.AgentThoughtChunk) or n.meta is not UNSET:
        return None
    c = u.content  # type: ignore[union-attr]
    if type(c) is not t.TextContent or u.meta is not UNSET or c.meta is not UNSET:
        return None
    return c.text if c.annotations is UNSET else None


class ChunkMerger:
    """Plain text chunks of the same kind, session and message merge; nothing else does.
    Texts are kept in a list while merging (joined once, when the merged one is sent)."""

    def merge(self, held: t.SessionNotification | _Texts, new: t.SessionNotification) -> Any:
        first = held.first if isinstance(held, _Texts) else held
        text = _plain_text(new)
        if (
            text is None
            or type(new.update) is not type(first.update)
            or new.session_id != first.session_id
            or new.update.message_id != first.update.message_id  # type: ignore[union-attr]
        ):
            return None
        if isinstance(held, _Texts):
            held.texts.append(text)
            return held
        earlier = _plain_text(held)
        return None if earlier is None else _Texts(held, [earlier, text])

    def done(self, held: t.SessionNotification | _Texts) -> t.SessionNotification:
        if not isinstance(held, _Texts):
            return held
        first = held.first.update
        assert isinstance(first, t.AgentMessageChunk | t.AgentThoughtChunk)
        content = t.TextContent(text="".join(held.texts))
        update = type(first)(content=content, message_id=first.message_id)
        return t.SessionNotification(session_id=held.first.session_id, update=update)


def merge_chunks(held: Any, new: Any) -> t.SessionNotification | None:
    """Two ``session/update`` notifications as one, when both are plain text chunks of
    the same kind, session and message (no annotations, no ``_meta``); else ``None``."""
    merger = ChunkMerger()
    merged = merger.merge(held, new)
    return None if merged is None else merger.done(merged)


def wire(
    config: Config,
    connection: Connection,
    env: Mapping[str, str] = os.environ,
    initialized: Callable[[], None] | None = None,
) -> Agent:
    """The agent on ``connection``: its routes, the warm-up (and ``initialized``)
    started once the ``initialize`` reply is written, chunk coalescing if ``env`` asks
    for it."""
    if env.get(COALESCE_ENV, "") not in ("", "0"):
        connection.coalesce["session/update"] = ChunkMerger()
    def late() -> None:  # (the warm-up thread) what opens a session
        start_probe()  # a process of its own: runs beside what follows
        services = agent.services()
        services.sessions.ready_store()

    def imports() -> None:
        warm(config, agent.warmup.opened, params, late)

    agent = Agent(config, ClientProxy(connection), imports)
    routes = agent.routes()
    params = [route.params_type for route in routes.values()]
    initialize = routes["initialize"]

    def start_warming() -> None:
        nonlocal initialized
        then, initialized = initialized, None
        if then is not None:
            then()
        # The probe (started at start) has usually ended by now: judged here, before the
        # warm-up thread shares the processor, not by the first session/new's answer.
        known()
        agent.warmup.start()

    async def initialize_then_warm(p: Any) -> Any:
        result = await initialize.handler(p)
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, start_warming)  # after the reply is written
        return result

    routes["initialize"] = Route(initialize.params_type, initialize_then_warm)
    connection.routes.update(routes)
    return agent


async def serve(
    config: Config,
    initialized: Callable[[], None] | None = None,
    stop_signals: Iterable[signal.Signals] = (),
    reload: Callable[[], Config] | None = None,
) -> None:
    """Serve the client on stdin/stdout until stdin ends, or one of ``stop_signals``
    comes: then as at the end of stdin, every turn is cancelled (their commands' process
    groups killed), MCP servers and terminals stopped, sessions flushed, and the output
    written whole. With ``reload`` (the configuration read again), ``SIGUSR1`` applies its
    ``[limits]`` (``handlers.reload``)."""
    reader, writer = await open_stdio(config.limits.max_message_bytes)
    connection = Connection(reader, writer)
    agent = wire(config, connection, initialized=initialized)
    loop = asyncio.get_running_loop()
    stops = list(stop_signals)
    for sig in stops:
        loop.add_signal_handler(sig, reader.stop)
    if reload is not None:
        on_signal(agent.models, agent.turn_deadlines, reload)
    try:
        await connection.serve()
    finally:
        agent.cancel_all()  # stdin closed: every turn ends now (children are killed)
        await connection.close()
        await agent.shutdown()
        await writer.aclose()
        for sig in stops:
            loop.remove_signal_handler(sig)
