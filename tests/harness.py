"""A scriptable ACP client that drives ``python -m acp_agent`` over real stdio.

Every line the agent writes is validated against the official schema (``SchemaChecker``);
the ``checker`` fixture in conftest fails the test on any violation.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .limits import WAIT, eventually
from .schema_check import SchemaChecker

ROOT = Path(__file__).resolve().parent.parent

_AUTO: Any = object()  # "pick the next id" (None is a valid JSON-RPC id)

ClientHandler = Callable[[dict[str, Any]], Awaitable[Any] | Any]
Script = list[Any]
"""What the offline model plays (``ACP_AGENT_OFFLINE_SCRIPT``): a list of replies."""
Scripted = Callable[..., "AgentProcess"]
"""The ``scripted`` fixture (conftest.py): a script (and flags) -> an agent."""


class ResponseError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


#: What a Python subprocess needs to be measured too (coverage's ``patch = subprocess``).
COVERAGE_VARS = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")


def coverage_env() -> dict[str, str]:
    """The coverage variables of this process, for a subprocess given a minimal env."""
    return {name: os.environ[name] for name in COVERAGE_VARS if name in os.environ}


NO_USER_CONFIG = tempfile.mkdtemp(prefix="acp-agent-tests-config-")
"""An empty XDG_CONFIG_HOME: the developer's config.toml and the keys `acp-agent login`
stored never reach a test's agent (a test names its own directory when it needs one)."""
atexit.register(shutil.rmtree, NO_USER_CONFIG, True)


def agent_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without the agent's and providers' variables, and without the
    developer's ``~/.config/acp-agent/config.toml``; then ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACP_AGENT_", "OPENAI_", "ANTHROPIC_"))
    }
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_CONFIG_HOME"] = NO_USER_CONFIG
    env.update(extra or {})
    return env


class AgentProcess:
    PROGRAM: tuple[str, ...] = ("-m", "acp_agent")
    """What the interpreter runs, before ``args`` (the agent; a test of the harness itself
    may run a stand-in)."""

    def __init__(
        self,
        checker: SchemaChecker,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.checker = checker
        self.args = args
        self.env = agent_env(env)
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.messages: list[dict[str, Any]] = []  # everything the agent sent, in order
        self.updates: list[dict[str, Any]] = []  # session/update params, in order
        self.client_requests: list[dict[str, Any]] = []  # agent -> client requests
        self.handlers: dict[str, ClientHandler] = {
            "session/request_permission": allow_first_option,
        }
        self._ids = itertools.count(100)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._answering: set[asyncio.Task[None]] = set()
        self.stderr = b""
        self.killed = False
        """Set by :meth:`kill`: the agent may have died in the middle of a line."""

    async def start(self) -> AgentProcess:
        assert self.proc is None, "agent already started"
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *self.PROGRAM,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            limit=512 * 1024 * 1024,
        )
        self._reader = asyncio.create_task(self._read())
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        return self

    async def __aenter__(self) -> AgentProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _drain_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        while chunk := await self.proc.stderr.read(65536):
            self.stderr += chunk

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            cut = not line.endswith(b"\n")  # then it is the last one: the output ended
            if cut and self.checker.unterminated(line, killed=self.killed):
                continue
            message = self.checker.check_line(line)
            if message is None:
                continue
            self.messages.append(message)
            if "method" in message and "id" in message:
                self.client_requests.append(message)
                task = asyncio.create_task(self._answer(message))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
            elif "method" in message:
                if message["method"] == "session/update":
                    self.updates.append(message["params"])
            else:
                fut = self._pending.pop(_key(message.get("id")), None)
                if fut is not None and not fut.done():
                    fut.set_result(message)
            async with self._changed:
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def _answer(self, message: dict[str, Any]) -> None:
        handler = self.handlers.get(message["method"])
        if handler is None:
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32601, "message": "Method not found"}}
        else:
            try:
                result = handler(message["params"])
                if asyncio.iscoroutine(result):
                    result = await result
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            except ResponseError as exc:
                reply = {"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": exc.code, "message": exc.message}}
            except asyncio.CancelledError:
                return
            except Exception as exc:  # a broken handler still answers, like a real client
                reply = {"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32603, "message": f"client handler failed: {exc!r}"}}
        await self.send(reply)
        async with self._changed:  # what the handler did may be what a test waits for
            self._changed.notify_all()

    # ---------------------------------------------------------------- sending

    async def send(self, message: dict[str, Any]) -> None:
        self.checker.observe_inbound(message)
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def request_raw(self, method: str, params: Any = None, *, id: Any = _AUTO,
                          timeout: float = WAIT) -> dict[str, Any]:
        """Send a request; return the whole response message (result or error)."""
        request_id = next(self._ids) if id is _AUTO else id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[_key(request_id)] = fut
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await asyncio.wait_for(fut, timeout)

    async def request(self, method: str, params: Any = None, **kw: Any) -> Any:
        response = await self.request_raw(method, params, **kw)
        if "error" in response:
            error = ResponseError(response["error"])
            if error.code == -32603:  # a bug of the agent's: what it logged says which
                error.add_note("the agent's stderr, last lines (so far):\n"
                               + self.stderr.decode(errors="replace")[-6000:])  # fmt: skip
            raise error
        return response["result"]

    async def sent_request(self, method: str, params: Any = None, *, id: Any = _AUTO
                           ) -> asyncio.Future[dict[str, Any]]:
        """Send a request now (it is on the wire when this returns); the future is its
        response."""
        request_id = next(self._ids) if id is _AUTO else id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[_key(request_id)] = fut
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return fut

    def start_request(self, method: str, params: Any = None, *, id: Any = _AUTO,
                      timeout: float = WAIT) -> asyncio.Task[dict[str, Any]]:
        return asyncio.create_task(self.request_raw(method, params, id=id, timeout=timeout))

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    # ---------------------------------------------------------------- conveniences

    async def initialize(self, capabilities: dict[str, Any] | None = None, **kw: Any) -> Any:
        return await self.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": capabilities if capabilities is not None else {},
            "clientInfo": {"name": "harness", "version": "0"},
            **kw,
        }, id=0)

    async def new_session(self, cwd: str, **kw: Any) -> str:
        result = await self.request("session/new", {"cwd": cwd, "mcpServers": [], **kw})
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str, **kw: Any) -> Any:
        return await self.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, **kw)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        """Wait until ``predicate()`` holds; it is checked whenever the agent sent something
        and whenever a handler answered one of its requests."""
        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)
        await asyncio.wait_for(_wait(), timeout)

    def tool_calls(self, session_id: str) -> list[dict[str, Any]]:
        """The session's tool calls as a client shows them: each ``tool_call`` with its
        updates merged in (a call may be announced while the model streams it, then
        completed by updates)."""
        calls: dict[str, dict[str, Any]] = {}
        for update in self.updates_of(session_id):
            kind = update["sessionUpdate"]
            if kind == "tool_call":
                calls[update["toolCallId"]] = dict(update)
            elif kind == "tool_call_update" and update["toolCallId"] in calls:
                calls[update["toolCallId"]].update(
                    {k: v for k, v in update.items() if k != "sessionUpdate"})
        return list(calls.values())

    def updates_of(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            u["update"]
            for u in self.updates
            if u["sessionId"] == session_id
            and (kind is None or u["update"]["sessionUpdate"] == kind)
        ]

    async def reload(self) -> None:
        """SIGUSR1: the agent reads its configuration again (``handlers.reload``); returns
        once it has applied the limits (it says so in its log: run it with ``--log-level
        info``), or failed to (the log says why)."""
        assert self.proc is not None, "agent not started"
        said = self._reloads()
        self.proc.send_signal(signal.SIGUSR1)
        await eventually(lambda: self._reloads() > said, "the agent reloaded its limits")

    def _reloads(self) -> int:
        return sum(self.stderr.count(e) for e in (b"limits reloaded", b"not reloaded"))

    async def logged(self, event: str) -> None:
        """Wait until the agent's log (its stderr, at the level it was started with) has
        said ``event``: e.g. ``connected ahead`` (``--log-level debug``), its warm-up done
        and its connection to the model's server open."""
        await eventually(lambda: event.encode() in self.stderr, f"the agent logged {event!r}")

    def kill(self) -> None:
        """SIGKILL the agent (a crash: it cleans nothing up). What it wrote before dying is
        still in the pipe: :meth:`close` reads it all (a last line the kill cut short is
        not a message; see :meth:`SchemaChecker.unterminated`)."""
        assert self.proc is not None, "agent not started"
        self.killed = True
        self.proc.kill()

    async def close(self, timeout: float = WAIT) -> int | None:
        """Close stdin (EOF) and wait for the agent to exit by itself; one still running
        after ``timeout`` seconds is killed (its exit code is then ``-9``)."""
        if self.proc is None:
            return None
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):  # it may exit in between
                self.proc.kill()
            await self.proc.wait()
        if self._reader:
            await self._reader
        if self._stderr_task:
            await self._stderr_task
        for task in list(self._answering):  # e.g. a handler that never answers
            task.cancel()
        await asyncio.gather(*self._answering, return_exceptions=True)
        return self.proc.returncode


def allow_first_option(params: dict[str, Any]) -> dict[str, Any]:
    option = next(o for o in params["options"] if o["kind"] == "allow_once")
    return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}


def select_kind(kind: str) -> ClientHandler:
    def handler(params: dict[str, Any]) -> dict[str, Any]:
        option = next(o for o in params["options"] if o["kind"] == kind)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    return handler


def _key(value: Any) -> tuple[type, Any]:
    return (type(value), value)
