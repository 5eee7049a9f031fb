"""The process edge: wires stdio, the connection and the agent together, runs until
stdin closes, and warms what the first prompt will need.

Warm-up happens here, not in a registry that happens to be imported early: after the
first session response (never during ``initialize`` or ``session/new``), a worker thread
imports the turn engine, the tools and the configured model's provider and SDK.
"""

from __future__ import annotations

import functools
import importlib

from .agent import Agent
from .client import ClientProxy
from .config import Config
from .rpc.connection import Connection
from .rpc.framing import open_stdio

#: What every first prompt needs, whatever the model.
WARM_MODULES = ("acp_agent.turn", "acp_agent.toolcall", "acp_agent.tools", "acp_agent.subagents")


def warm(config: Config) -> None:
    """Import what the first prompt needs (call from a worker thread)."""
    from .providers import spec

    for module in (*WARM_MODULES, *spec(config.provider).warm):
        importlib.import_module(module)
    from .tools import builtin_tools

    for tool in builtin_tools().tools():
        tool.spec  # noqa: B018 (imports each tool and builds its JSON Schema once)


async def serve(config: Config) -> None:
    reader, writer = await open_stdio(config.limits.max_message_bytes)
    connection = Connection(reader, writer)
    agent = Agent(config, ClientProxy(connection), functools.partial(warm, config))
    connection.routes.update(agent.routes())
    try:
        await connection.serve()
    finally:
        agent.cancel_all()  # stdin closed: every turn ends now (children are killed)
        await connection.close(grace=0.3)
        await agent.shutdown()
        await writer.aclose()
