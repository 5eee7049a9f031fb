"""Wires stdio, the connection and the agent together and runs until stdin closes."""

from __future__ import annotations

from .agent import Agent
from .client import ClientProxy
from .config import Config
from .rpc.connection import Connection
from .rpc.framing import open_stdio


async def serve(config: Config) -> None:
    reader, writer = await open_stdio(config.limits.max_message_bytes)
    connection = Connection(reader, writer)
    agent = Agent(config, ClientProxy(connection))
    connection.routes.update(agent.routes())
    try:
        await connection.serve()
    finally:
        agent.cancel_all()  # stdin closed: every turn ends now (children are killed)
        await connection.close(grace=0.3)
        await agent.shutdown()
        await writer.aclose()
