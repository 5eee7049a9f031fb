"""``acp-agent serve`` in this event loop, under the real hypercorn: both profiles through
the same conversation (tests/remote.py's clients check every message against the schema),
sessions held by one connection at a time, reattached after a disconnect, the server's
file system, and the gate (token, origins, /healthz)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_agent.config import Config
from acp_agent.transports.hub import Hub, Limits, Settings

from .harness import ResponseError
from .remote import AUTH, TOKEN, Client, HttpClient, WsClient, serving
from .schema_check import SchemaChecker

NEVER = "NEVER-REACHED"
HANG = [{"text": "partial answer "}, {"hang": True}, {"text": NEVER}]


def write_script(tmp_path: Path, script: list[Any]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return str(path)


@pytest.fixture
def config(tmp_path: Path, state_dir: str) -> Config:
    script = [[{"text": "Hello over the network!"}], HANG, [{"text": "Back again."}]]
    return Config(state_dir=state_dir, offline_script=write_script(tmp_path, script))


Served = tuple[str, Hub]


@pytest.fixture
async def served(config: Config) -> AsyncIterator[Served]:
    async with serving(config, Settings(token=TOKEN)) as found:
        yield found


Connect = Callable[..., Any]


@pytest.fixture(params=["ws", "http"])
def connect(request: pytest.FixtureRequest, checker: SchemaChecker) -> Connect:
    """A connected client of the profile (its own schema checker, its failures the
    test's)."""
    made: list[Client] = []

    async def make(url: str, **kw: Any) -> Client:
        own = SchemaChecker()
        client: Client
        if request.param == "ws":
            client = await WsClient(url, own, **kw).connect()
        else:
            client = HttpClient(url, own, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        checker.failures.extend(client.checker.failures)


async def test_a_conversation(served: Served, connect: Connect, workspace: str) -> None:
    url, hub = served
    client = await connect(url)
    init = await client.initialize()
    assert init["agentCapabilities"]["loadSession"] is True
    assert client.connection_id in hub.peers
    sid = await client.new_session(workspace)
    result = await client.prompt(sid, "hello")
    assert result["stopReason"] == "end_turn"
    assert client.text(sid) == "Hello over the network!"
    await client.close()
