"""The MCP servers of one session: started in the background, their tools offered to the
model, their prompts offered as slash commands, and all of them shut down together.

Usage (the agent's side)::

    hub = McpHub(params.mcp_servers, cwd=params.cwd, on_problem=report, on_change=refresh)
    hub.start()                          # session/new answers at once
    ...
    await hub.wait_ready(10.0)           # before the first model request, bounded
    tools = [*builtin, *hub.tools()]     # each model request: ready servers' tools
    commands = [p.as_command() for p in hub.prompts()]
    content = await hub.get_prompt("mcp:github:review", "pr=12")   # -> prompt blocks
    await hub.aclose()                   # session close / stdin EOF

Problems (a server that failed to start, is not ready in time, was lost and restarted,
could not be restarted, or was lost for good) go to ``on_problem(severity, title,
description)``, severity ``"error"`` or ``"warning"``. They are held back until the first
:meth:`McpHub.wait_ready` call, so nothing is sent about a session before the editor has
its ``session/new`` answer; after that they are reported as they happen. ``on_change()``
is called when the offered tools or prompts change (a server became ready, changed its
lists, or was lost), e.g. to resend ``available_commands_update``; :meth:`McpHub.toolset`
follows the same changes for the model. Neither callback's exceptions reach the hub
(they are logged).

A lost server is started again (an HTTP or ACP one reconnected) once; see ``_server``.
Servers of type ``acp`` (MCP over ACP) need ``acp``, the way to send ``mcp/message``
requests to the editor; see ``_acp``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from msgspec import UNSET

from .. import log
from ..conversation import ToolSpec
from ..errors import ToolError
from ..protocol import types as t
from ..tools.base import Tool, Toolset
from ._acp import AcpRequest
from ._convert import prompt_content
from ._names import MAX_TOOL_NAME, Namer, command_name, prompt_arguments, sanitize, tool_name
from ._server import ServerConnection
from ._tool import McpTool

if TYPE_CHECKING:
    from mcp.types import Prompt

OnProblem: TypeAlias = Callable[[str, str, "str | None"], Awaitable[None]]
OnChange: TypeAlias = Callable[[], Awaitable[None]]


class PromptError(Exception):
    """A slash command for an MCP prompt could not be run (unknown command, missing
    argument, or the server failed); ``message`` is meant for the user."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str | None
    required: bool


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """An MCP prompt as slash-command data."""

    name: str
    """The command name, ``mcp:<server>:<prompt>`` (no spaces)."""
    description: str
    server: str
    """The server's configured name."""
    prompt: str
    """The prompt's name on its server."""
    arguments: tuple[PromptArgument, ...]

    @property
    def takes_input(self) -> bool:
        return bool(self.arguments)

    @property
    def hint(self) -> str | None:
        """Input hint: the argument's name, or ``key=… [key=…]`` when there are several."""
        if not self.arguments:
            return None
        if len(self.arguments) == 1:
            arg = self.arguments[0]
            return arg.description or arg.name
        return " ".join(
            f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in self.arguments
        )

    def as_command(self) -> t.AvailableCommand:
        hint = self.hint
        return t.AvailableCommand(
            name=self.name,
            description=self.description,
            input=t.UnstructuredCommandInput(hint=hint) if hint is not None else UNSET,
        )


class McpHub:
    """The MCP servers of one session (see the module docstring)."""

    def __init__(
        self,
        servers: Sequence[t.McpServerAny],
        *,
        cwd: str,
        on_problem: OnProblem | None = None,
        on_change: OnChange | None = None,
        acp: AcpRequest | None = None,
        environ: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ) -> None:
        self._on_problem = on_problem
        self._on_change = on_change
        keys = Namer()
        self._servers = [
            ServerConnection(
                config,
                keys.name(("server", str(i)), sanitize(config.name)),
                cwd=cwd,
                on_ready=self._server_ready,
                on_updated=self._server_updated,
                on_lost=self._server_lost,
                on_failed=self._server_failed,
                acp=acp,
                environ=environ,
            )
            for i, config in enumerate(servers)
        ]
        self.version = 0
        """Goes up whenever the offered tools or prompts change."""
        self._tool_names = Namer(limit=MAX_TOOL_NAME)
        self._command_names = Namer()
        self._tools: dict[str, list[McpTool]] = {}
        self._prompts: dict[str, list[tuple[McpPrompt, ServerConnection]]] = {}
        self._started = False
        self._closing: asyncio.Future[None] | None = None
        self._announced = False
        self._held: list[tuple[str, str, str | None]] = []
        self._reported_slow: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Connect every server in background tasks; returns at once. Needs a running loop."""
        if self._started or self._closing is not None:
            return
        self._started = True
        for server in self._servers:
            if server.kind is None:
                server.state = "failed"
                server.error = f"transport {server.config.type!r} is not supported"
                server.settled.set()
                self._problem("error", f"MCP server {server.name!r} not started", server.error)
            else:
                server.start()

    async def wait_ready(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for servers still starting. Those not ready
        by then are reported once and skipped (later calls do not wait for them again);
        they may still join later."""
        self._announced = True
        held, self._held = self._held, []
        for problem in held:
            await self._deliver(*problem)
        pending = [
            s for s in self._servers
            if not s.settled.is_set() and s.key not in self._reported_slow
        ]
        if pending and timeout > 0:
            waits = [asyncio.ensure_future(s.settled.wait()) for s in pending]
            try:
                await asyncio.wait(waits, timeout=timeout)
            finally:
                for w in waits:
                    w.cancel()
        for server in self._servers:
            if server.settled.is_set() or server.key in self._reported_slow:
                continue
            self._reported_slow.add(server.key)
            await self._report(
                "warning",
                f"MCP server {server.name!r} is still starting",
                f"Not ready after {timeout:g} s; continuing without its tools for now. "
                "They will be offered once it is ready.",
            )

    async def aclose(self) -> None:
        """Shut every server down (stdio children terminated); idempotent, bounded."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_all())
        await asyncio.shield(self._closing)

    async def _close_all(self) -> None:
        await asyncio.gather(*(s.close() for s in self._servers), return_exceptions=True)
        self._tools.clear()
        self._prompts.clear()
        self.version += 1

    # ------------------------------------------------------------------ what's offered

    def tools(self) -> list[Tool]:
        """The ready servers' tools, in server order."""
        return [tool for s in self._servers for tool in self._tools.get(s.key, [])]

    def toolset(self, base: Toolset) -> Toolset:
        """``base`` and the ready servers' tools, as they are at each look (a turn's next
        model request sees tools that came, went or changed meanwhile)."""
        return _LiveToolset(base, self)

    def prompts(self) -> list[McpPrompt]:
        """The ready servers' prompts as slash-command data, in server order."""
        return [p for s in self._servers for p, _ in self._prompts.get(s.key, [])]

    async def get_prompt(self, command_name: str, text: str) -> list[t.ContentBlock]:
        """Run the prompt behind ``command_name`` with ``text`` as its input; its messages
        come back as content blocks for the model. Raises :class:`PromptError`."""
        pairs = (pair for per_server in self._prompts.values() for pair in per_server)
        found = next((pair for pair in pairs if pair[0].name == command_name), None)
        if found is None:
            raise PromptError(f"Unknown MCP command /{command_name}")
        prompt, server = found
        args = prompt_arguments(text, [a.name for a in prompt.arguments])
        missing = [a.name for a in prompt.arguments if a.required and not args.get(a.name)]
        if missing:
            usage = f"/{prompt.name} {prompt.hint}" if prompt.hint else f"/{prompt.name}"
            raise PromptError(f"Missing {', '.join(missing)}. Usage: {usage}")
        try:
            result = await server.get_prompt(prompt.prompt, args)
        except ToolError as exc:
            raise PromptError(exc.message) from None
        return prompt_content(result)

    def status(self) -> dict[str, str]:
        """``{server name: "starting" | "ready" | "restarting" | "failed" | "closed"}``,
        for logs and tests."""
        return {s.name: s.state for s in self._servers}

    # ------------------------------------------------------------------ server events

    def _offer(self, server: ServerConnection) -> None:
        self._tools[server.key] = [
            McpTool(server, tool, tool_name(self._tool_names, server.key, tool.name))
            for tool in server.tools
        ]
        self._prompts[server.key] = [(self._prompt(server, p), server) for p in server.prompts]
        self.version += 1

    def _withdraw(self, server: ServerConnection) -> None:
        self._tools.pop(server.key, None)
        self._prompts.pop(server.key, None)
        self.version += 1

    async def _server_ready(self, server: ServerConnection) -> None:
        if self._closing is not None:
            return
        self._offer(server)
        if server.restarts:
            await self._report(
                "warning",
                f"MCP server {server.name!r} stopped; {server.restarted}",
                f"{server.lost}\n\nIts tools are offered again.",
            )
        await self._changed()

    async def _server_updated(self, server: ServerConnection) -> None:
        if self._closing is not None:
            return
        self._offer(server)
        await self._changed()

    async def _server_lost(self, server: ServerConnection, restarting: bool) -> None:
        if self._closing is not None:
            return
        self._withdraw(server)
        if not restarting:
            verb = server.restarted
            await self._report(
                "error",
                f"MCP server {server.name!r} stopped again",
                f"{server.lost}\n\nIt was {verb} once already, so it is not {verb} again; "
                "its tools are no longer offered.",
            )
        await self._changed()

    def _prompt(self, server: ServerConnection, p: Prompt) -> McpPrompt:
        description = (p.description or "").strip() or (p.title or p.name)
        return McpPrompt(
            name=command_name(self._command_names, server.key, p.name),
            description=f"{description} (MCP: {server.name})",
            server=server.name,
            prompt=p.name,
            arguments=tuple(
                PromptArgument(a.name, a.description, bool(a.required)) for a in p.arguments or ()
            ),
        )

    async def _server_failed(self, server: ServerConnection, was_lost: bool) -> None:
        if self._closing is not None:
            return
        if not was_lost:
            await self._report("error", f"MCP server {server.name!r} failed to start", server.error)
            return
        doing = "Restarting" if server.kind == "stdio" else "Reconnecting"
        await self._report(
            "error",
            f"MCP server {server.name!r} stopped; could not be {server.restarted}",
            f"{server.lost}\n\n{doing} it failed: {server.error}",
        )

    # ------------------------------------------------------------------ callbacks

    def _problem(self, severity: str, title: str, description: str | None) -> None:
        """Hold a problem found by sync code until the next ``wait_ready``."""
        log.warning("mcp.problem", severity=severity, title=title, description=description)
        self._held.append((severity, title, description))

    async def _report(self, severity: str, title: str, description: str | None) -> None:
        log.warning("mcp.problem", severity=severity, title=title, description=description)
        if not self._announced:
            self._held.append((severity, title, description))
        else:
            await self._deliver(severity, title, description)

    async def _deliver(self, severity: str, title: str, description: str | None) -> None:
        if self._on_problem is None or self._closing is not None:
            return
        try:
            await self._on_problem(severity, title, description)
        except Exception:
            log.exception("mcp.on_problem_failed")

    async def _changed(self) -> None:
        if self._on_change is None or self._closing is not None:
            return
        try:
            await self._on_change()
        except Exception:
            log.exception("mcp.on_change_failed")


class _LiveToolset(Toolset):
    """A toolset whose MCP part is looked up again whenever the hub's offer changed."""

    def __init__(self, base: Toolset, hub: McpHub) -> None:
        super().__init__([])
        self._base = base
        self._hub = hub
        self._version = -1

    def _current(self) -> dict[str, Tool]:
        if self._version != self._hub.version:
            self._version = self._hub.version
            tools = (*self._base.tools(), *self._hub.tools())
            self._tools = {tool.spec.name: tool for tool in tools}
        return self._tools

    def get(self, name: str) -> Tool | None:
        return self._current().get(name)

    def names(self) -> list[str]:
        return list(self._current())

    def tools(self) -> list[Tool]:
        return list(self._current().values())

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._current().values()]

    def __contains__(self, name: object) -> bool:
        return name in self._current()
