"""``acp-agent serve`` for tests: the server (in this event loop, or a subprocess) and two
small ACP clients, one per profile, that check every message the agent sends against the
official schema as :class:`~tests.harness.AgentProcess` does on stdio.

* :func:`serving`: the ASGI app under the real hypercorn, in this loop, on a fresh
  loopback port (fast; coverage sees it directly).
* :class:`ServeProcess`: ``python -m acp_agent serve`` as a process (the command line,
  signals, replicas); its URL is read from the line it prints when it listens.
* :class:`WsClient` (``websockets``) and :class:`HttpClient` (``httpx``, HTTP/1.1 or
  HTTP/2): the connection stream opened after ``initialize``, a session's stream when
  its id is first seen, ``Acp-Session-Id`` on every message naming a session, as the
  TypeScript SDK's clients do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import socket
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import websockets

from acp_agent.config import Config
from acp_agent.transports.app import App
from acp_agent.transports.hub import Hub, Settings

from .harness import ResponseError, agent_env, allow_first_option
from .limits import WAIT
from .schema_check import SchemaChecker

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@contextlib.asynccontextmanager
async def serving(
    config: Config, settings: Settings, **hyper: Any
) -> AsyncIterator[tuple[str, Hub]]:
    """The app served by hypercorn on 127.0.0.1; yields its ``/acp`` URL and hub. On
    exit, hypercorn is told to stop and the hub drained."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config as HyperConfig

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    hub = Hub(config, settings)
    hc = HyperConfig()
    hc.bind = [f"fd://{sock.detach()}"]  # hypercorn's now
    hc.accesslog = None
    hc.errorlog = None
    hc.websocket_max_message_size = settings.limits.max_message_bytes
    hc.graceful_timeout = 1.0
    for key, value in hyper.items():
        setattr(hc, key, value)
    stop = asyncio.Event()
    task = asyncio.ensure_future(serve(App(hub), hc, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    try:
        yield f"http://127.0.0.1:{port}/acp", hub
    finally:
        await hub.drain()
        stop.set()
        await asyncio.wait_for(task, WAIT)


class ServeProcess:
    """``python -m acp_agent serve ARGS`` with ``env``; :attr:`url` once it listens."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = agent_env(env)
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.stderr = b""
        self._stderr: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self) -> ServeProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_agent", "serve", *self.args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env)  # fmt: skip
        self._stderr = asyncio.create_task(self._read())
        await asyncio.wait(
            [asyncio.ensure_future(self._listening.wait()), self._stderr],
            timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if not self._listening.is_set():
            raise AssertionError(f"serve did not start listening: {self.stderr.decode()[-2000:]}")
        return self

    async def _read(self) -> None:
        assert self.proc and self.proc.stderr
        while line := await self.proc.stderr.readline():
            self.stderr += line
            found = re.search(rb"listening on (\S+)", line)
            if found:
                self.url = found.group(1).decode()
                self._listening.set()

    async def wait(self, timeout: float = WAIT) -> int:
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        if self._stderr is not None:
            await self._stderr
        return code

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        if self._stderr is not None:
            await self._stderr


class Client:
    """What both profiles share: requests and their answers, updates, the client's own
    handlers (permission: allow once), schema checks."""

    def __init__(self, checker: SchemaChecker | None = None) -> None:
        self.checker = checker or SchemaChecker()
        self.messages: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "session/request_permission": allow_first_option,
        }
        self.connection_id: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def received(self, text: str) -> None:
        message = self.checker.check_line(text)
        if message is None:
            return
        self.messages.append(message)
        if "method" in message and "id" in message:
            handler = self.handlers.get(message["method"])
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
            if handler is None:
                reply["error"] = {"code": -32601, "message": "Method not found"}
            else:
                reply["result"] = handler(message["params"])
            self._spawn(self.send(reply, session=message["params"].get("sessionId")))
        elif message.get("method") == "session/update":
            self.updates.append(message["params"])
        elif "method" not in message:
            future = self._pending.pop(_key(message.get("id")), None)
            if future is not None and not future.done():
                future.set_result(message)
        self._changed.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, message: dict[str, Any], session: str | None = None) -> None:
        raise NotImplementedError

    async def request_raw(self, method: str, params: Any = None, *, id: Any = None,
                          timeout: float = WAIT) -> dict[str, Any]:  # fmt: skip
        request_id = next(self._ids) if id is None else id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[_key(request_id)] = future
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.checker.observe_inbound(message)
        await self.send(message)
        return await asyncio.wait_for(future, timeout)

    async def request(self, method: str, params: Any = None, **kw: Any) -> Any:
        response = await self.request_raw(method, params, **kw)
        if "error" in response:
            raise ResponseError(response["error"])
        return response["result"]

    def start(self, method: str, params: Any = None) -> asyncio.Task[dict[str, Any]]:
        return asyncio.ensure_future(self.request_raw(method, params))

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self, **caps: Any) -> Any:
        return await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    async def new_session(self, cwd: str) -> str:
        return str((await self.request("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"])

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        async def wait() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), timeout)

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u["update"]["content"].get("text", "") for u in self.updates
                       if u["sessionId"] == session_id and u["update"]["sessionUpdate"] == kind)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class WsClient(Client):
    def __init__(self, url: str, checker: SchemaChecker | None = None,
                 headers: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(checker)
        self.url = url.replace("http", "ws", 1)
        self.headers = AUTH if headers is None else headers
        self.socket: Any = None
        self.closed = asyncio.Event()

    async def connect(self) -> WsClient:
        self.socket = await websockets.connect(self.url, additional_headers=self.headers,
                                               max_size=None, compression=None)  # fmt: skip
        self.connection_id = self.socket.response.headers.get("acp-connection-id")
        self._spawn(self._read())
        return self

    async def _read(self) -> None:
        try:
            async for frame in self.socket:
                self.received(frame if isinstance(frame, str) else frame.decode())
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed.set()
            self._changed.set()

    async def send(self, message: dict[str, Any], session: str | None = None) -> None:
        await self.socket.send(json.dumps(message))

    async def send_text(self, text: str) -> None:
        await self.socket.send(text)

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()
        await super().close()


class HttpClient(Client):
    def __init__(self, url: str, checker: SchemaChecker | None = None,
                 headers: dict[str, str] | None = None, **httpx_args: Any) -> None:  # fmt: skip
        super().__init__(checker)
        self.url = url
        self.http = httpx.AsyncClient(headers=AUTH if headers is None else headers,
                                      timeout=httpx.Timeout(WAIT), **httpx_args)  # fmt: skip
        self.streams: dict[str | None, asyncio.Task[None]] = {}
        self.statuses: list[int] = []

    def _headers(self, session: str | None) -> dict[str, str]:
        out = {"content-type": "application/json"}
        if self.connection_id:
            out["acp-connection-id"] = self.connection_id
        if session:
            out["acp-session-id"] = session
        return out

    async def send(self, message: dict[str, Any], session: str | None = None) -> None:
        params = message.get("params")
        session = session or (params.get("sessionId") if isinstance(params, dict) else None)
        if message.get("method") == "initialize":
            response = await self.http.post(self.url, json=message, headers=self._headers(None))
            self.statuses.append(response.status_code)
            if response.status_code != 200:
                raise ResponseError({"code": response.status_code, "message": response.text})
            self.connection_id = response.headers["acp-connection-id"]
            self.open_stream(None)
            self.received(response.text)
            return
        if session:
            self.open_stream(session)
        response = await self.http.post(self.url, content=json.dumps(message),
                                        headers=self._headers(session))  # fmt: skip
        self.statuses.append(response.status_code)
        if response.status_code != 202:
            raise ResponseError({"code": response.status_code, "message": response.text})

    def received(self, text: str) -> None:
        super().received(text)
        with contextlib.suppress(ValueError, AttributeError):
            result = json.loads(text).get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                self.open_stream(result["sessionId"])

    def open_stream(self, session: str | None) -> None:
        if session not in self.streams or self.streams[session].done():
            self.streams[session] = asyncio.ensure_future(self._stream(session))

    async def _stream(self, session: str | None) -> None:
        headers = {"accept": "text/event-stream", **self._headers(session)}
        headers.pop("content-type")
        with contextlib.suppress(httpx.HTTPError):
            timeout = httpx.Timeout(WAIT, read=None)
            async with self.http.stream("GET", self.url, headers=headers,
                                        timeout=timeout) as response:  # fmt: skip
                self.statuses.append(response.status_code)
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
                    elif line == "" and data:
                        self.received("\n".join(data))
                        data = []

    async def delete(self) -> int:
        response = await self.http.delete(self.url, headers=self._headers(None))
        return response.status_code

    async def close(self) -> None:
        for task in self.streams.values():
            task.cancel()
        await asyncio.gather(*self.streams.values(), return_exceptions=True)
        await self.http.aclose()
        await super().close()


def _key(value: Any) -> tuple[type, Any]:
    return (type(value), value)
