"""An MCP server whose lists change and which can be killed, for the hub's change and
restart tests (the official SDK's ``MCPServer``).

``python live.py [--legacy] [--pid-file PATH] [--once PATH]`` serves it over stdio:

- ``add_tool(name)``, ``remove_tool(name)``, ``add_prompt(name)`` change its lists and say
  so before answering: on a ``subscriptions/listen`` stream (2026-07-28 protocol) and as
  ``notifications/*/list_changed`` (earlier protocols; the SDK sends each where it belongs);
- ``crash`` exits the process at once, ``hang`` never answers, ``pid`` gives its process
  id, ``echo`` echoes;
- ``--legacy`` serves only the ``initialize`` handshake protocol (2025-11-25), like
  servers built on earlier SDKs: the client's ``server/discover`` probe is refused;
- ``--pid-file PATH`` appends the process id, one line per start;
- ``--once PATH`` refuses to start (exit 1, a line on stderr) if PATH exists, and
  creates it otherwise: the first start works, a restart fails.

:func:`build_server` gives the same server for in-process HTTP tests.
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt


def build_server(name: str = "live") -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    async def tools_changed(ctx: Context) -> None:
        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add a tool that answers with its own name.")
    async def add_tool(name: str, ctx: Context) -> str:
        def made() -> str:
            return f"I am {name}"

        server.add_tool(made, name=name, description=f"The {name} tool.")
        await tools_changed(ctx)
        return f"added {name}"

    @server.tool(description="Remove a tool.")
    async def remove_tool(name: str, ctx: Context) -> str:
        server.remove_tool(name)
        await tools_changed(ctx)
        return f"removed {name}"

    @server.tool(description="Add a prompt that asks for its own name.")
    async def add_prompt(name: str, ctx: Context) -> str:
        def made() -> str:
            return f"Prompt {name} speaking."

        server.add_prompt(Prompt.from_function(made, name=name, description=f"The {name} prompt."))
        await ctx.notify_prompts_changed()
        await ctx.session.send_prompt_list_changed()
        return f"added prompt {name}"

    @server.tool(description="Exit the server process abruptly.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Never answer (until the call is cancelled).")
    async def hang() -> str:
        await anyio.sleep_forever()
        return "never"

    @server.tool(description="The server's process id.")
    def pid() -> str:
        return str(os.getpid())

    return server


async def serve_legacy(server: MCPServer) -> None:
    """Serve only the initialize handshake era over stdio."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state,
                         init_options=low.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="live")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--pid-file")
    parser.add_argument("--once")
    args = parser.parse_args()
    if args.once:
        if os.path.exists(args.once):
            sys.stderr.write("live: refusing to start again\n")
            sys.exit(1)
        open(args.once, "w").close()
    if args.pid_file:
        with open(args.pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    server = build_server(args.name)
    if args.legacy:
        anyio.run(serve_legacy, server)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
