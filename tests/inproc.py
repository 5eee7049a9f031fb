"""The harness's client (:class:`AgentProcess`) against an agent in this event loop.

The agent is the real one (``Agent`` routes on a ``Connection``), or any route table,
served over two in-memory line pipes instead of a subprocess's stdio: thousands of
messages a second, for the fuzz tests. Every line it writes still goes through the
``SchemaChecker``. :class:`FakeProcess` stands in for the subprocess: its stdin feeds
the connection's reader, its stdout reads what the connection wrote, and ``wait``
returns when ``serve`` has ended and the agent has shut down, as ``server.serve`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from acp_agent.client import ClientProxy
from acp_agent.config import Config
from acp_agent.handlers.agent import Agent
from acp_agent.rpc.connection import Connection, Route
from acp_agent.rpc.framing import LineReader, LineSink, LineSource, MemoryPipe, Oversized

from .harness import AgentProcess
from .schema_check import SchemaChecker


class _Stdin:
    def __init__(self, reader: LineReader) -> None:
        self._reader = reader
        self._closed = False

    def write(self, data: bytes) -> None:
        self._reader.feed(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self._closed = True
        self._reader.feed_eof()

    def is_closing(self) -> bool:
        return self._closed


class _Stdout:
    def __init__(self, reader: LineReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        line = await self._reader.readline()
        if line is None:
            return b""
        assert not isinstance(line, Oversized)
        return line + b"\n"


class _Stderr:
    async def read(self, n: int) -> bytes:
        return b""


class FakeProcess:
    """What :class:`AgentProcess` uses of an ``asyncio.subprocess.Process``."""

    def __init__(self, stdin: _Stdin, stdout: _Stdout, serving: asyncio.Task[None]) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = _Stderr()
        self.serving = serving
        self.returncode: int | None = None

    async def wait(self) -> int:
        try:
            await asyncio.shield(self.serving)
            self.returncode = 0
        except asyncio.CancelledError:
            self.returncode = -9
        except Exception:
            self.returncode = 1
        return self.returncode

    def kill(self) -> None:
        self.serving.cancel()


class WatchedConnection(Connection):
    """A connection that keeps the lines whose dispatch raised (there should be none:
    ``serve()`` survives them, but each is a bug the fuzz tests want to see)."""

    def __init__(
        self, reader: LineSource, writer: LineSink, routes: Mapping[str, Route[Any]] | None = None
    ) -> None:
        super().__init__(reader, writer, routes)
        self.dispatch_failures: list[bytes | Oversized] = []

    def _dispatch_failed(self, line: bytes | Oversized) -> None:
        self.dispatch_failures.append(line)
        super()._dispatch_failed(line)


class InProcessAgent(AgentProcess):
    """An agent (``config``), or a bare connection with ``routes``, in this event loop."""

    def __init__(
        self,
        checker: SchemaChecker,
        config: Config | None = None,
        routes: Mapping[str, Route[Any]] | None = None,
    ) -> None:
        super().__init__(checker)
        self.config = config
        self.routes = routes
        self.connection: WatchedConnection | None = None

    async def start(self) -> InProcessAgent:
        assert self.proc is None, "agent already started"
        to_agent, to_client = LineReader(), LineReader()
        connection = self.connection = WatchedConnection(to_agent, MemoryPipe(to_client))
        agent: Agent | None = None
        if self.routes is not None:
            connection.routes.update(self.routes)
        else:
            assert self.config is not None, "an agent needs a config (with its own state dir)"
            agent = Agent(self.config, ClientProxy(connection))
            connection.routes.update(agent.routes())
        serving = asyncio.create_task(self._serve(connection, agent, to_client))
        fake = FakeProcess(_Stdin(to_agent), _Stdout(to_client), serving)
        self.proc = cast("asyncio.subprocess.Process", fake)  # the same surface, in-process
        self._reader = asyncio.create_task(self._read())
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        return self

    async def __aenter__(self) -> InProcessAgent:
        return await self.start()

    @property
    def dispatch_failures(self) -> list[bytes | Oversized]:
        assert self.connection is not None
        return self.connection.dispatch_failures

    @property
    def serving(self) -> asyncio.Task[None]:
        """The task running ``Connection.serve`` (done only after end of input)."""
        return cast(FakeProcess, self.proc).serving

    @staticmethod
    async def _serve(connection: Connection, agent: Agent | None, out: LineReader) -> None:
        """``server.serve`` on memory pipes."""
        try:
            await connection.serve()
        finally:
            if agent is not None:
                agent.cancel_all()
            await connection.close()
            if agent is not None:
                await agent.shutdown()
            out.feed_eof()
